-- The template lint (issue 16): each version keeps the findings the server's
-- lint gave its files at push, as the JSON `abode templates versions show`
-- prints (docs/lint.md). NULL: a version pushed before the lint existed,
-- which was never linted (not "clean").
ALTER TABLE template_versions ADD COLUMN lint TEXT;
