-- Parameters are checked at the door: each template version keeps the
-- parameters its template declares, read at push from a template-import plan,
-- as a JSON array of abode_contract::parameters::ParameterDefinition.
-- NULL means "not known": a version pushed before this migration, whose
-- declarations were never read. It must not read as '[]' ("declares none"),
-- which would refuse every parameter of its workspaces and drop their values.
ALTER TABLE template_versions ADD COLUMN parameters TEXT;
