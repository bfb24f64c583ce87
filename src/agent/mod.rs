//! The `%%ask` agent: a graph that asks a model for Python, runs it in the
//! user's namespace, looks at the result and keeps going until the request is
//! done or the turn limit is reached.
//!
//! Nothing here touches ZeroMQ or pyo3. The layers, each importing only
//! from those before it:
//!
//! - [`llm`]: the model providers' wire formats behind one request shape;
//!   [`shown`]: what a run shows, as typed values the [`ports`] carry;
//! - [`run`]: the types every graph shares (state, findings, events,
//!   effects, limits);
//! - [`graph`] (the engine), [`parse`] (reading model text), [`prompts`],
//!   [`schemas`], [`budget`] (fitting a context window), [`config`]
//!   (options and settings);
//! - [`graphs`]: the default, analyst, planner, triage and `rlm()` graphs;
//! - [`render`]: how a run looks in the cell (depends on events and state);
//! - [`session`]: serving `%%ask` and `ask()` over the [`ports`] the Python
//!   side implements: routing, provider choice, conversation and memory, and
//!   the effects that run code, through the typed calls of [`scope_calls`].

pub mod budget;
pub mod config;
pub mod failure;
pub mod graph;
pub mod graphs;
pub mod llm;
pub mod parse;
pub mod ports;
pub mod prompts;
pub mod render;
pub mod run;
pub mod schemas;
pub mod scope_calls;
#[cfg(test)]
mod script;
pub mod session;
pub mod shown;
