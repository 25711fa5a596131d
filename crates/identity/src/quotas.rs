//! Reading a person's quota: their budget (the sum of their groups'
//! allowances, `Everyone` included) and what each of their workspaces costs
//! a day. Budgets come from groups, which identity keeps; the costs are
//! the builds' (`abode-cost`, reserved when a plan is judged). Enforcing
//! the budget is the build's judge step's, not this.

use abode_store::{QuotaUsage, User};

use crate::authz::Action;
use crate::error::or_not_found;
use crate::{Caller, Identity, IdentityError};

impl Identity {
    /// `username`'s quota (`None`: the caller's own). A person reads their
    /// own; owners and user-admins read anyone's. Another person's is
    /// refused before the name is looked up, so a refusal does not tell
    /// whether the name exists.
    pub async fn quota(
        &self,
        caller: &Caller,
        username: Option<&str>,
    ) -> Result<(User, QuotaUsage), IdentityError> {
        let user = match username {
            None => caller.user.clone(),
            Some(name) if name == caller.user.username => caller.user.clone(),
            Some(name) => {
                caller.authorize(Action::QuotaRead, None)?;
                or_not_found(self.store.user_by_name(name).await, || {
                    format!("user \"{name}\" not found")
                })?
            }
        };
        caller.authorize(Action::QuotaRead, Some(&user.id))?;
        let usage = self.store.quota_usage(&user.id).await?;
        Ok((user, usage))
    }
}
