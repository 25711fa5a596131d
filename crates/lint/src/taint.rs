//! What an expression derives from. The lint does not evaluate HCL; it follows
//! references (`data.abode_workspace_owner.me.name`, `local.x`, `var.x`,
//! `module.m.out`, `each`/`count`, other resources) back to the inputs that
//! matter: those that change after a workspace is created, the transition,
//! the agent's token and script, and the managed resources named.
//!
//! It over-approximates on purpose: anything an expression mentions anywhere
//! (a condition, an index, a `for` collection) counts as something it derives
//! from, since a change there can change the value.

use std::collections::BTreeSet;

use hcl_edit::expr::{Expression, Traversal, TraversalOperator};
use hcl_edit::visit::{self, Visit};

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Origin {
    OwnerName,
    WorkspaceName,
    TemplateVersion,
    MutableParameter(String),
    /// `transition` or `start_count`: differs between start and stop.
    Transition,
    AgentToken,
    AgentScript,
    /// A managed resource, by address.
    Resource(String),
}

impl Origin {
    /// Inputs that change after a workspace is created.
    pub(crate) fn is_mutable_input(&self) -> bool {
        matches!(
            self,
            Origin::OwnerName
                | Origin::WorkspaceName
                | Origin::TemplateVersion
                | Origin::MutableParameter(_)
        )
    }
}

/// An origin and the reference, as written, that leads to it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Taint {
    pub origin: Origin,
    pub reference: String,
}

pub(crate) type Taints = BTreeSet<Taint>;

/// The origin of a reference to one of Abode's data sources, if it matters.
pub(crate) fn abode_data_origin(path: &[String]) -> Option<Origin> {
    let [data, kind, _name, attribute, ..] = path else {
        return None;
    };
    if data != "data" {
        return None;
    }
    match (kind.as_str(), attribute.as_str()) {
        ("abode_workspace_owner", "name" | "full_name" | "email" | "groups") => {
            Some(Origin::OwnerName)
        }
        ("abode_workspace", "name") => Some(Origin::WorkspaceName),
        ("abode_workspace", "template_version") => Some(Origin::TemplateVersion),
        ("abode_workspace", "transition" | "start_count") => Some(Origin::Transition),
        _ => None,
    }
}

/// Every reference an expression makes, as the names of its path (indexes
/// and splats left out: `abode_agent.main[0].token` is
/// `abode_agent.main.token`).
pub(crate) fn references(expression: &Expression) -> Vec<Vec<String>> {
    let mut collector = Collector::default();
    collector.visit_expr(expression);
    collector.paths
}

#[derive(Default)]
struct Collector {
    paths: Vec<Vec<String>>,
}

impl Visit for Collector {
    fn visit_traversal(&mut self, node: &Traversal) {
        match &node.expr {
            Expression::Variable(root) => {
                let mut path = vec![root.as_str().to_string()];
                for operator in &node.operators {
                    match operator.value() {
                        TraversalOperator::GetAttr(name) => path.push(name.as_str().to_string()),
                        TraversalOperator::Index(index) => self.visit_expr(index),
                        _ => {}
                    }
                }
                self.paths.push(path);
            }
            _ => visit::visit_traversal(self, node),
        }
    }
}
