//! The agent graphs, one module each, built on the engine ([`super::graph`])
//! from common steps ([`steps`]): the default loop, the analyst, the
//! planner, the triage (which hands work to the others) and the `rlm()`
//! sub-agent. They work on the run state and reach the world only through
//! [`crate::agent::run::Effects`].

pub mod analyst;
pub mod check;
pub mod default;
pub mod planner;
pub mod rlm;
mod solutions;
pub mod steps;
pub mod triage;
pub mod unmet;

pub use analyst::analyst_graph;
pub use default::default_graph;
pub use planner::planner_graph;
pub use rlm::rlm_graph;
pub use steps::Settings;
pub use triage::triage_graph;
