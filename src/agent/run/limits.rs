//! How long runs may go, per graph, unless the user says otherwise; the
//! toolbox functions the planner may call by name, and the kinds of action
//! the guard asks about. Settings, the graphs and the triage's delegation
//! all read them here.

use std::sync::LazyLock;

/// Turns of the default graph.
pub const DEFAULT_MAX_TURNS: u32 = 5;

/// Figures a run sends to a model that sees images, at most.
pub const MAX_IMAGES_PER_RUN: usize = 4;

/// Turns of the analyst graph's code: the default graph's, which it runs.
pub const ANALYST_MAX_TURNS: u32 = DEFAULT_MAX_TURNS;

/// Steps of a planner run: each is one action, so a run needs more of them
/// than the default graph's turns.
pub const PLANNER_MAX_TURNS: u32 = 8;

/// Reviews of a triage run.
pub const TRIAGE_DEFAULT_MAX_REVIEWS: u32 = 3;

/// However many reviews are asked for, no triage run loops more often than
/// this.
pub const TRIAGE_MAX_REVIEWS: u32 = 10;

/// The triage's classification decides only at or above this confidence.
pub const TRIAGE_CONFIDENT: f64 = 0.9;

/// Turns of an `rlm()` sub-agent.
pub const RLM_MAX_TURNS: u32 = 10;

// TOOLBOX_FUNCTIONS and GUARDED_KINDS, from the package's declared.json
// (build.rs), which its Python side reads too.
include!(concat!(env!("OUT_DIR"), "/python_lists.rs"));

/// The toolbox functions the planner may call by name: the toolbox's own
/// (but `skills`, whose list the prompt has already) and `rlm`, a builtin
/// (they are what `prompts/toolbox.md` lists).
pub static PLANNER_TOOLS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    TOOLBOX_FUNCTIONS
        .iter()
        .copied()
        .filter(|name| *name != "skills")
        .chain(["rlm"])
        .collect()
});
