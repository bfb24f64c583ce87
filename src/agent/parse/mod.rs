//! Reading model text, as pure functions: code blocks, a block's change lines, prose without its
//! code, lenient JSON, the form a value must have and the keys a dict must hold, the review's verdict, the analyst's plan, the
//! planner's action, the triage's answers, the cheap checks on a
//! request and a turn's outcome, what a failed block's error says and
//! hints at, whether a request asks for a figure, a
//! key respelled as the data spells it, a function named otherwise than the
//! data it would replace, data a variable holds typed into a
//! block again,
//! numbers a block printed as fixed text rather than computed, what
//! pandas and numpy write for a call into a library that is not installed, and
//! well-known mistakes such as `len()` of a boolean mask, the names a
//! block binds only as a loop's or a `with`'s variable, the names it reads
//! from code that ran before it, a block without its comments, and an answer that
//! repeats itself. Small models write all of these loosely;
//! each parser is tested against answers recorded from the local model.

pub mod action;
pub mod bindings;
pub mod change_line;
pub mod checks;
pub mod claims;
pub mod code;
pub mod comments;
pub mod copied;
pub mod errors;
pub mod figure;
pub mod form;
pub mod in_place;
pub mod json;
pub mod keys;
pub mod pitfalls;
pub mod plan;
pub mod prose;
pub mod reads;
pub mod renamed;
pub mod repetition;
pub mod respell;
pub mod retyped;
pub mod stand_ins;
pub mod triage;
pub mod verdict;
