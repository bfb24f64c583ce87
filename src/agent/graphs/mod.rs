//! The agent graphs, one module each, built on the engine ([`super::graph`])
//! from common steps ([`steps`]): the default loop, the analyst, the
//! planner, the triage (which hands work to the others) and the `rlm()`
//! sub-agent. They work on the run state and reach the world only through
//! [`crate::agent::run::Effects`].

pub mod analyst;
pub mod check;
mod cross_check;
pub mod default;
mod fresh_solution;
pub mod planner;
pub mod rlm;
mod solutions;
pub mod steps;
pub mod triage;
pub mod unmet;

pub use analyst::analyst_graph;
pub use default::default_graph;
pub use planner::{FailedStep, planner_graph};
pub use rlm::rlm_graph;
pub use steps::NodeSettings;
pub use triage::triage_graph;

#[cfg(test)]
mod tests {
    use super::rlm::Search;
    use super::*;
    use crate::agent::graph::Node;
    use crate::agent::run::Agents;
    use crate::agent::script::Script;

    #[test]
    fn every_graph_leads_only_to_nodes_it_has() {
        let settings = NodeSettings::for_tests;
        let search = Search {
            query: "where?".into(),
            description: "str".into(),
            depth_left: 1,
        };
        let missing = [
            default_graph::<Script>(settings(), 3)
                .missing_node()
                .map(|n| n.name()),
            analyst_graph::<Script>(settings(), 3)
                .missing_node()
                .map(|n| n.name()),
            planner_graph::<Script>(settings(), 3, false, FailedStep::Checked)
                .missing_node()
                .map(|n| n.name()),
            planner_graph::<Script>(settings(), 3, true, FailedStep::Checked)
                .missing_node()
                .map(|n| n.name()),
            rlm_graph::<Script>(settings(), search, 3)
                .missing_node()
                .map(|n| n.name()),
            triage_graph::<Script>(settings(), 2, Agents { claude: true })
                .missing_node()
                .map(|n| n.name()),
        ];
        assert_eq!(missing, [None; 6]);
    }
}
