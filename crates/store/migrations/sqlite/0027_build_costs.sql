-- Quotas (issue 31): a build's daily cost, the sum of the abode_metadata
-- daily_cost of what its plan leaves behind (crates/cost), written when the
-- server judges the plan. NULL: not judged yet, or a cost the plan does not
-- tell (the build log says why). A pending or running build's cost is what
-- it reserves of its owner's budget.
ALTER TABLE builds ADD COLUMN daily_cost INTEGER;

-- Why a build was refused before apply, when it was: `quota` (its plan
-- would take the owner past their budget). NULL otherwise.
ALTER TABLE builds ADD COLUMN refusal TEXT;
