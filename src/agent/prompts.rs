//! Prompt templates (in `prompts/*.md`, embedded at build time) and their
//! rendering. Placeholders are `{name}`; values are inserted verbatim.

use crate::agent::run::{AsWritten, Difference, Execution, FormDispute, KeyInformation, Skill};

const SYSTEM: &str = include_str!("../../prompts/system.md");
const CONTEXT: &str = include_str!("../../prompts/context.md");
const REFLECT: &str = include_str!("../../prompts/reflect.md");
/// The question of the form a named value must have, asked before the
/// value is seen.
pub const EXPECTED_FORM: &str = include_str!("../../prompts/expected_form.md");
/// The question of the keys a dict the request names must have.
pub const DICT_KEYS: &str = include_str!("../../prompts/dict_keys.md");
/// The analyst's question before any work: does the request need code, an
/// evaluation, an explanation.
pub const PLAN: &str = include_str!("../../prompts/plan.md");
/// Asks for a critical look at results the conversation shows.
pub const EVALUATE: &str = include_str!("../../prompts/evaluate.md");
/// Asks for the final answer once the conversation shows the results.
pub const EXPLAIN_RESULTS: &str = include_str!("../../prompts/explain_results.md");
const EXPLAIN: &str = include_str!("../../prompts/explain.md");
const TOOLBOX: &str = include_str!("../../prompts/toolbox.md");
const RLM: &str = include_str!("../../prompts/rlm.md");
const PLANNER: &str = include_str!("../../prompts/planner.md");
const TRIAGE_CLASSIFY: &str = include_str!("../../prompts/triage_classify.md");
const TRIAGE_PLAN: &str = include_str!("../../prompts/triage_plan.md");

/// The prompt for a generate turn: the instructions and the toolbox, then
/// the namespace summary and the cells the user ran since the last request.
///
/// The namespace goes in the system prompt, not with the latest message:
/// with it there, the local coder model read a value off the summary and
/// answered with it instead of writing the code that stores it. A run
/// keeps the namespace it began with (see `AgentState::pinned_namespace`),
/// so the system prompt stays the same from call to call and a prompt
/// cache (llama.cpp's, Anthropic's) reuses it and the messages after it;
/// each execution report says what the code changed. What changes from one
/// request to the next comes last, so the next request's first call reuses
/// the instructions and the toolbox too (about 700 tokens: with the local
/// model on 2 cores, some 9 s of its time to the first text).
pub fn system(namespace: &str, recent_cells: &[String], skills: &[Skill]) -> String {
    instructions_then_context(SYSTEM, skills, namespace, recent_cells)
}

/// `instructions`, the toolbox, then the namespace and the recent cells:
/// what changes between requests comes last, so every request's prompt
/// starts with the same text, which a provider's prompt cache keeps (on a
/// small local model, several seconds of every first call).
fn instructions_then_context(
    instructions: &str,
    skills: &[Skill],
    namespace: &str,
    recent_cells: &[String],
) -> String {
    format!(
        "{}\n\n{}\n\n{}",
        instructions.trim_end(),
        toolbox(skills).trim_end(),
        with_context(CONTEXT, namespace, recent_cells)
    )
}

/// The toolbox the model's code can call, and the skills it can load.
pub fn toolbox(skills: &[Skill]) -> String {
    let listed = if skills.is_empty() {
        "(none installed)".to_owned()
    } else {
        skills
            .iter()
            .map(|(name, description)| format!("- {name}: {description}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    TOOLBOX.replace("{skills}", &listed)
}

/// The system prompt of an `rlm()` sub-agent answering `query` about a
/// value `description` describes, with `depth_left` more levels of `rlm()`.
pub fn rlm(query: &str, description: &str, depth_left: u32, max_turns: u32) -> String {
    let depth_left = match depth_left {
        0 => "no more levels: this one may not call rlm".to_owned(),
        1 => "1 more level".to_owned(),
        n => format!("{n} more levels"),
    };
    RLM.replace("{description}", description)
        .replace("{depth_left}", &depth_left)
        .replace("{max_turns}", &max_turns.to_string())
        .replace("{query}", query)
}

/// How much of a skill's text a request that names it loads.
const SKILL_CHARS: usize = 4000;

/// A skill the request names, loaded after it: its instructions, to follow.
pub fn loaded_skill(name: &str, text: &str) -> String {
    let text = text.trim();
    let text = &text[..crate::text::floor_char_boundary(text, SKILL_CHARS)];
    format!(
        "\n\nThe skill {name} is loaded; its instructions follow. Carry them out yourself with \
         Python code on the live variables (the skill's name is not a function or a module).\n{text}"
    )
}

/// What the review's verdict says of its `answer` field, in the field's
/// place: a small model sometimes copies it as the answer
/// ([`crate::agent::parse::verdict`] takes such a copy out).
pub const VERDICT_ANSWER_FIELD: &str = "when done: the result in one plain sentence, with the \
     values that matter, taken from the output or the variables (never invented); empty when \
     the output says it all";

/// The system prompt of the review, the same for every request (the
/// request is in the message), so a prompt cache keeps all of it.
pub fn reflect() -> String {
    REFLECT.replace("{answer_field}", VERDICT_ANSWER_FIELD)
}

/// The analyst graph's prompt for an answer no code was needed for.
pub fn explain(request: &str, namespace: &str) -> String {
    with_context(&EXPLAIN.replace("{request}", request), namespace, &[])
}

/// The planner graph's prompt: how to answer with one action per step,
/// the toolbox, and, when the informer is on (`Some`), what it found.
pub fn planner(
    namespace: &str,
    recent_cells: &[String],
    skills: &[Skill],
    key_information: Option<&[KeyInformation]>,
) -> String {
    let (inform, found) = match key_information {
        None => (String::new(), String::new()),
        Some(found) => {
            let inform = "- inform: ask the informer to describe variables in detail (columns, \
missing values, first rows). The input is their names.\n";
            let found = if found.is_empty() {
                "(nothing yet)".to_owned()
            } else {
                found
                    .iter()
                    .map(|(_, text)| text.trim_end())
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            (
                inform.to_owned(),
                format!("\n\n## Key information\n{found}"),
            )
        }
    };
    let instructions = PLANNER.replace("{inform}", &inform);
    // What the informer finds changes most often: it comes last.
    instructions_then_context(&instructions, skills, namespace, recent_cells) + &found
}

/// The triage graph's quick classification, asked after the request:
/// which agent, how sure. `agents` lists them with what each is for;
/// `choices` names them for the JSON field.
pub fn triage_classify(agents: &str, choices: &str) -> String {
    TRIAGE_CLASSIFY
        .replace("{agents}", agents)
        .replace("{choices}", choices)
        .trim_end()
        .to_owned()
}

/// The triage graph's full plan: an agent, a tool or a reply.
pub fn triage_plan(
    namespace: &str,
    recent_cells: &[String],
    skills: &[Skill],
    agents: &str,
    choices: &str,
) -> String {
    let instructions = TRIAGE_PLAN
        .replace("{agents}", agents)
        .replace("{choices}", choices);
    instructions_then_context(&instructions, skills, namespace, recent_cells)
}

/// Sent back once when the first answer has no code but the request needs
/// some.
pub const CODE_PLEASE: &str = "Do this in the notebook: answer with a ```python block that \
works on the live variables and does what I asked (store results where I said). Do not guess \
values; compute them.";

/// The output of a block that is a cell the user ran since the last
/// request, sent again: not run.
pub const RECENT_CELL_AGAIN: &str = "Not run again: this block is a cell the user already ran (what \
it made is in the namespace). Write new code that does what the request asks, using those \
variables.";

/// Said when a block the guard refused ran again without the lines it
/// copied from a cell the user ran.
pub const COPIED_LINES_LEFT_OUT: &str = "The lines copied from a cell the user already ran were \
left out (what that cell made is in the namespace), and the rest ran.";

/// After a review, its verdict asked for alone (weighed by its tokens'
/// likeliest choices).
pub const VERDICT_ALONE: &str = "\n\nYour verdict alone, as JSON: {\"is_complete\": true or false}";

/// Said at the end of the prompt of another solution, sampled beside the
/// turn's answer: its code alone.
pub const CODE_ONLY: &str = "\n\n(Reply with the ```python block alone, no explanation.)";

/// Asks for another solution's `code`, which raised `error`, mended (with
/// what the error usually means, `hint`, where known): it runs again from
/// the start, so it must be whole. The code is quoted as a draft to
/// correct, not as the model's own answer: a small model given back its
/// answer mostly sends it again.
pub fn mend_solution(code: &str, error: &str, hint: Option<&str>) -> String {
    let hint = hint.map(|h| format!("Hint: {h}.\n")).unwrap_or_default();
    format!(
        "This code was written for the request, and it fails:\n```python\n{}\n```\nError:\n```\n{}\n```\n\
{hint}Correct the code so that it does the request: change what causes the error, and write \
the whole corrected code (it runs from the start, on the notebook as it was before).",
        code.trim_end(),
        error.trim_end()
    )
}

/// Sent back once when the model answers without code after a turn the
/// review found unfinished.
pub fn still_unfinished(reason: &str) -> String {
    let why = if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    };
    format!(
        "The request is not finished{why}, and an answer without code changes nothing in the \
notebook. Send a ```python block that does it."
    )
}

/// Sent back once to the planner when it answered in prose before doing
/// anything, for a request that needs code.
pub const PLANNER_FORMAT: &str = "Do this in the notebook, one step at a time. Answer with a \
thought and one action, in this form:\nThought: what to do first\nAction: python\nAction \
Input:\n```python\n# code that works on the live variables\n```";

/// Sent back when an answer was cut off before its code was complete (at the
/// length limit, or stopped for repeating itself).
pub const CUT_OFF: &str = "Your answer was cut off before the code was complete (too long, or \
saying the same thing over and over), so nothing ran. Send shorter code: one focused block, \
without repeating data or lines.";

/// Said when a block that named its function or class after a variable
/// holding data runs again with it named `new_name`.
pub fn renamed_definition(name: &str, new_name: &str) -> String {
    format!(
        "`{name}` holds the user's data: the same code again with the definition named \
         `{new_name}`, and its calls."
    )
}

/// What the model and the user are told when a block runs again with keys
/// spelled as the data spells them ([`crate::agent::parse::respell`]): each
/// (written, key).
pub fn respelled(keys: &[(String, String)]) -> String {
    let spelled: Vec<String> = keys
        .iter()
        .map(|(written, key)| format!("'{written}' as '{key}'"))
        .collect();
    let (that, spelling) = match keys.len() {
        1 => ("that", "spelling"),
        _ => ("those", "spellings"),
    };
    format!(
        "The data spells {}: the same code again with {that} {spelling}.",
        spelled.join(", ")
    )
}

/// The status line of a block run again with each call of `method` through
/// `accessor` made on the value itself.
pub fn accessor_left_out(accessor: &str, method: &str) -> String {
    format!(
        "`.{method}` belongs to the value itself, not to `.{accessor}`: the same code again without `.{accessor}`."
    )
}

/// The status line of a block run again without the line that read `file`
/// into `name`, which the namespace holds already.
pub fn not_reloaded(name: &str, file: &str) -> String {
    format!("`{name}` is loaded already: the same code again without reading {file}.")
}

/// The next step after a block failed on a library that is not installed
/// (`hint`: what the failure means), with what computes each of its calls
/// into that `package` without it (`calls`).
pub fn without_library(hint: &str, package: &str, calls: &str) -> String {
    format!(
        "fix the cause of the error ({hint}) and run the corrected code. Without {package}: {calls}"
    )
}

/// What a `NameError` on `name` means when `name` came from `package`,
/// which an earlier block found not installed.
pub fn name_from_missing_library(name: &str, package: &str) -> String {
    format!(
        "`{name}` came from {package}, which is not installed here: do it with what is \
         (pandas, numpy, the standard library)"
    )
}

/// The status line of a block run again without `import`, which imports
/// a library that is not installed and that nothing in the block uses.
pub fn unused_import_left_out(import: &str) -> String {
    format!(
        "`{import}` imports what nothing in the block uses, from a library that is not \
         installed: the same code again without it."
    )
}

/// The status line when the lines that printed `number` (and any other) as
/// fixed text that nothing computed holds are left out of what is checked.
pub fn typed_in_left_out(number: &str) -> String {
    format!(
        "{number} was typed into the printed text, not computed: the lines that print numbers \
         nothing computed are left out of what is checked."
    )
}

/// For the review: lines were left out of the code since the `numbers`
/// they printed were typed in (empty when there are none). What else they
/// said is not quoted: a small judge repeats a quoted claim in its answer.
pub fn left_out_as_typed_in(numbers: &[String]) -> String {
    if numbers.is_empty() {
        return String::new();
    }
    format!(
        "\nLeft out of the code above: lines that printed text with numbers typed in, not \
         computed ({}). What they said is not done.\n",
        numbers.join(", ")
    )
}

/// Told when a block that typed in data variables hold (`names`) ran again
/// without those statements.
pub fn not_retyped(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    let (listed, verb, statements, them, as_is) = match quoted.as_slice() {
        [one] => (one.clone(), "is", "statement", "it", "it is"),
        [rest @ .., last] => (
            format!("{} and {last}", rest.join(", ")),
            "are",
            "statements",
            "them",
            "they are",
        ),
        [] => (String::new(), "is", "statement", "it", "it is"),
    };
    format!(
        "{listed} {verb} defined already with the data: the same code again without the \
         {statements} that typed {them} in (a table as printed, or the request's example, is not \
         the data). Use {listed} as {as_is}."
    )
}

/// The next step when a value the request names does not exist: with
/// (missing, changed), the user's variable the work changed instead.
pub fn create_missing(changed_instead: Option<(&String, &String)>) -> String {
    let next = "run code that creates it as the request says".to_owned();
    match changed_instead {
        Some((name, other)) => format!(
            "{next}: the code changed `{other}` instead; assign what the request asks for to \
             `{name}` (`{name} = ...`)"
        ),
        None => next,
    }
}

/// What to do after code that failed (`hint`: what such an error usually
/// means, or why it is not a sign the request cannot be done).
pub fn fix_the_failure(hint: Option<&str>) -> String {
    match hint {
        Some(hint) => format!("fix the cause of the error ({hint}) and run the corrected code"),
        None => "fix the cause of the error and run the corrected code".to_owned(),
    }
}

/// Said before a solution written afresh from the request, run in place of
/// a turn that sent the same code back ([`crate::agent::graphs`]'s
/// `fresh_solution`).
pub const FRESH_SOLUTION: &str = "The same code gives the same result each time. A solution \
written afresh from the request computes another result: running it instead.";

/// Sent back once when a turn ran the same code with the same result as an
/// earlier turn.
pub const REPEATED: &str = "You ran code that ran before and got the same result as then. If that \
result already answers my request, reply with the answer in plain words and no code. Otherwise \
do something different.";

/// Sent back once when a turn ran the code of an earlier turn, not the one
/// before, with the same result: what it was told then (`told`), which holds
/// again. A small model that alternates between two answers forgets why
/// the first was sent back.
pub fn repeated_earlier(told: &str) -> String {
    const SHOWN_CHARS: usize = 800;
    let told = told.trim();
    let end = crate::text::floor_char_boundary(told, SHOWN_CHARS);
    let told = if end < told.len() {
        format!("{}...", &told[..end])
    } else {
        told.to_owned()
    };
    format!(
        "You sent code you had sent before, and it gave the same result as then. What you were \
told of it then holds again:\n{told}\nDo not send that code again: do what was asked there."
    )
}

/// Sent back once when a turn ran the same failing code with the same error
/// as an earlier turn: a small model keeps resending a block it believes
/// right, so it is told plainly that the block cannot work and how to find
/// out why.
pub fn repeated_failure(error: &str, hint: Option<&str>) -> String {
    let hint = hint.map(|hint| format!(" ({hint})")).unwrap_or_default();
    format!(
        "You sent the same code again and it failed with the same error: {error}{hint}. That \
code cannot work, so do not send it again. Write it a different way, in small steps: compute \
each intermediate value in a variable of its own and print it, then build the result from \
those."
    )
}

/// Sent back once when a turn ran the same code with the same result as
/// the turn before, after a review (or a check) found that result
/// unfinished: why, again, so the model does not take its code for right.
pub fn repeated_unfinished(reasoning: &str, next_action: &str) -> String {
    let next = if next_action.trim().is_empty() {
        String::new()
    } else {
        format!(" Next: {}.", next_action.trim().trim_end_matches('.'))
    };
    format!(
        "You sent the same code again and got the same result, which does not finish the \
request: {}.{next} Do it a different way.",
        reasoning.trim().trim_end_matches('.')
    )
}

/// Why a turn that pandas warned about is not done, and what to write
/// instead: `rewrite`, the model's own line assigning to the column, when
/// there is one.
pub fn changed_a_copy(rewrite: Option<&str>) -> (String, String) {
    let next = match rewrite {
        Some(rewrite) => format!("write `{rewrite}` instead (no inplace=True)"),
        None => "assign the result back instead: table['col'] = table['col'].method(...) \
                 (inplace=True on one column changes a copy)"
            .to_owned(),
    };
    (
        "pandas warned that the change went to a copy, so the table itself did not change"
            .to_owned(),
        next,
    )
}

/// Why a turn that rebound `names` (asked to change them in place) is not
/// done, and what to write instead: the model's own statement in place
/// (`rewrite`) when there is one, else the general forms for `first`.
/// `restored`: the names whose original objects were put back.
pub fn rebound_not_in_place(
    names: &[String],
    restored: &[String],
    first: &str,
    rewrite: Option<&str>,
) -> (String, String) {
    let quoted = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut reasoning = format!(
        "{} was assigned a new object, but the request asks to change the object itself",
        quoted(names)
    );
    if !restored.is_empty() {
        reasoning.push_str(&format!(
            "; {} names the original object again, unchanged",
            quoted(restored)
        ));
    }
    let next = match rewrite {
        Some(rewrite) => format!(
            "write `{rewrite}` instead of assigning to {first}: that changes {first} itself"
        ),
        None => format!(
            "change the original object in place rather than assigning a new one to {first} \
             (for a table: {first}.fillna(..., inplace=True), \
             {first}.rename(columns=..., inplace=True), {first}[column] = ...; for a list: \
             {first}[:] = [...])"
        ),
    };
    (reasoning, next)
}

/// What the review of a turn reads: the request, then for each block the
/// code, what it printed and the variables it left, as plain facts.
pub fn review_request(request: &str, executions: &[&Execution]) -> String {
    let mut text = format!("Request:\n{}\n", request.trim());
    if executions.is_empty() {
        text.push_str("\nNothing ran.\n");
    }
    for execution in executions {
        // Code that printed nothing is not said to have: beside the values
        // listed below, a small judge reads an empty printout as work not
        // done ("the output is empty") and sends right work back.
        let printed = match execution.output.trim() {
            "" => String::new(),
            printed => format!("It printed:\n{printed}\n"),
        };
        let variables = if execution.changes.is_empty() {
            "(none changed)".to_owned()
        } else {
            execution.changes.join("\n")
        };
        let shown = match execution.rich_outputs {
            0 => String::new(),
            n => format!("\nIt showed {n} figure(s) or table(s).\n"),
        };
        let status = if execution.failed { " (it failed)" } else { "" };
        text.push_str(&format!(
            "\nCode that ran{status}:\n```python\n{}\n```\n{printed}{shown}\nVariables after it ran:\n{variables}\n",
            execution.code.trim_end()
        ));
    }
    text
}

/// Why a value is not done when the request writes out the result it
/// expects for the data the code read, and the value is another: the
/// reasoning, with where they differ when that is known (a small model
/// shown only the two printouts often sends the same code again), and the
/// next step, with both printed.
pub fn not_as_written(difference: &Difference) -> (String, String) {
    let Difference {
        name,
        written,
        value,
        differs_in,
        on_example,
    } = difference;
    let mut reasoning = if *on_example {
        "run on the request's example, the code does not make the result the request \
         writes out for it"
            .to_owned()
    } else {
        format!("`{name}` is not the result the request writes out for this data")
    };
    let certain = !differs_in.trim().is_empty();
    if certain {
        reasoning.push_str(&format!(". {}", differs_in.trim()));
    }
    let find = if certain {
        ""
    } else {
        "Find what differs and "
    };
    let written = written.trim_end();
    let value = value.trim_end();
    let next_action = if *on_example {
        format!(
            "the request shows the result it expects for its example:\n{written}\n\
             the code makes from that example:\n{value}\n\
             {find}change the code so that it makes that result from the example, computed \
             the same way from the notebook's own data (its values differ), not typed in"
        )
    } else {
        let compute = if certain { "Compute" } else { "compute" };
        format!(
            "the request shows the result it expects:\n{written}\n`{name}` holds:\n{value}\n\
             {find}{compute} `{name}` so that it is that result, from the data, not typed in"
        )
    };
    (reasoning, next_action)
}

/// What the summary line says of a value that is the result the request
/// writes out.
pub fn as_written(found: &AsWritten) -> String {
    let name = &found.name;
    if found.on_example {
        format!("{name} is what the request writes out for its example, with the code run on it")
    } else {
        format!("{name} is the result the request writes out")
    }
}

/// Why a run is done when every value the request names is the result it
/// writes out.
pub fn all_as_written(found: &[AsWritten]) -> String {
    match found {
        [one] => as_written(one),
        _ if found.iter().all(|f| !f.on_example) => {
            let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
            format!(
                "{} are the results the request writes out",
                names.join(", ")
            )
        }
        _ => found.iter().map(as_written).collect::<Vec<_>>().join("; "),
    }
}

/// A question about what the variable `name` of `request` must be once
/// done (its form, a dict's keys).
pub fn named_value_question(request: &str, name: &str) -> String {
    format!("Request: {}\nVariable: {name}", request.trim())
}

/// The run's closing answer, for the review to check beside the code.
pub fn answer_to_check(answer: &str) -> String {
    format!("\nThe answer given to the user:\n{}\n", answer.trim())
}

/// The values a request names, as they are now, for the review to check
/// against it (empty when it names none).
pub fn values_to_check(values: &[KeyInformation]) -> String {
    described_under("The values the request names, as they are now:", values)
}

/// `values`' descriptions under `heading` (empty when there are none).
fn described_under(heading: &str, values: &[KeyInformation]) -> String {
    if values.is_empty() {
        return String::new();
    }
    let mut text = format!("\n{heading}\n");
    for (_, description) in values {
        text.push_str(description.trim_end());
        text.push('\n');
    }
    text
}

/// The user's variables the code changed, as they are now, for the review
/// of a request that names no value (empty when there are none).
pub fn changed_values_to_check(values: &[KeyInformation]) -> String {
    described_under("The variables the code changed, as they are now:", values)
}

/// A value the code kept as it was after a check of its form sent it back,
/// for the review to settle: the check read the request before it saw the
/// value, and may be the one that is wrong.
pub fn kept_against_form_check(dispute: &FormDispute) -> String {
    format!(
        "\nA check that read only the request said: {}. The code kept `{}` as it was. \
         Decide from the request which is right.\n",
        dispute.reasoning.trim_end_matches('.'),
        dispute.name
    )
}

/// How many independent solutions computed the values under review, for
/// the review to weigh.
pub fn agreement_to_check(agree: usize, of: usize) -> String {
    format!(
        "\nOf {of} solutions of this request written independently, {agree} computed these same values.\n"
    )
}

/// What the model is told when another solution of the request, written
/// independently, computed other values than its own: both, and the
/// other's code, to find out which is right.
pub fn disputed(own: &str, rival_code: &str, rival: &str, rivals: usize) -> String {
    let who = if rivals > 1 {
        format!("{rivals} other solutions of the request, written independently, agree on")
    } else {
        "Another solution of the request, written independently, computed".to_owned()
    };
    format!(
        "Not done: {who} other values than yours, so at most one is right.\n\
         Yours:\n{own}\n\nThe other:\n```python\n{code}\n```\ngave:\n{rival}\n\n\
         Read the request again and find out which is right (print what decides it); \
         then store the right values, in the form the request asks for.",
        own = own.trim_end(),
        code = rival_code.trim_end(),
        rival = rival.trim_end(),
    )
}

/// An action's result, as the planner graph tells the model.
pub fn observation(report: &str) -> String {
    format!("Observation:\n{}", report.trim_end())
}

/// Added to a planner's observation when the step ran the code of an
/// earlier one (`step`, from 1) with the same outcome.
pub fn planner_repeated(step: usize) -> String {
    format!(
        "\nThis is the code of step {step} again, with the same result: running it again will not \
change anything. Take a different action."
    )
}

fn namespace_or_none(namespace: &str) -> &str {
    if namespace.trim().is_empty() {
        "(no user variables yet)"
    } else {
        namespace
    }
}

/// `template` with the namespace summary and the recent cells filled in.
fn with_context(template: &str, namespace: &str, recent_cells: &[String]) -> String {
    let recent = if recent_cells.is_empty() {
        "(none)".to_owned()
    } else {
        recent_cells
            .iter()
            .map(|code| format!("```python\n{}\n```", code.trim_end()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    template
        .replace("{namespace}", namespace_or_none(namespace))
        .replace("{recent_cells}", &recent)
        .trim_end()
        .to_owned()
}

/// The message that carries a failed verdict into the next generate turn.
pub fn not_done_yet(reasoning: &str, next_action: &str) -> String {
    let mut text = String::from("The request is not finished yet.");
    if !reasoning.trim().is_empty() {
        text.push_str(&format!(" Review: {}", reasoning.trim()));
    }
    if !next_action.trim().is_empty() {
        text.push_str(&format!("\nNext step: {}", next_action.trim()));
    }
    text
}

/// Which code a report is about.
#[derive(Clone, Copy)]
pub enum ReportedCode<'a> {
    /// Code the conversation does not show yet: written out in the report.
    Written(&'a str),
    /// Block `index` of the `of` blocks of the answer just above the report:
    /// named by its place, not written out again (a second copy costs a
    /// small model's server as long to read as the answer took to write).
    Above { index: usize, of: usize },
}

/// What the model is told about one executed block.
pub fn execution_report(
    code: ReportedCode<'_>,
    output: &str,
    failed: bool,
    changes: &[String],
) -> String {
    let status = if failed { "failed" } else { "ran" };
    let output = if output.trim().is_empty() {
        "(no output)"
    } else {
        output
    };
    let heading = match code {
        ReportedCode::Written(code) => format!("This code {status}:\n```python\n{code}\n```"),
        ReportedCode::Above { of: 1, .. } => format!("Your code {status}."),
        ReportedCode::Above { index, of } => format!("Your block {} of {of} {status}.", index + 1),
    };
    let mut report = format!("{heading}\nOutput:\n```\n{output}\n```");
    if !changes.is_empty() {
        report.push_str("\nVariables it changed:\n");
        for line in changes {
            report.push_str("- ");
            report.push_str(line);
            report.push('\n');
        }
        report.pop();
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_for_a_result_as_written_says_where_it_was_compared() {
        let found = |name: &str, on_example| AsWritten {
            name: name.into(),
            on_example,
        };
        assert_eq!(
            all_as_written(&[found("a", false), found("b", false)]),
            "a, b are the results the request writes out"
        );
        assert_eq!(
            all_as_written(&[found("a", false), found("b", true)]),
            "a is the result the request writes out; b is what the request writes out for its \
             example, with the code run on it"
        );
    }

    #[test]
    fn the_note_on_typed_in_data_names_each_variable() {
        let one = not_retyped(&["df".to_owned()]);
        assert!(
            one.starts_with(
                "`df` is defined already with the data: the same code again without \
                 the statement that typed it in"
            ),
            "{one}"
        );
        assert!(one.ends_with("Use `df` as it is."), "{one}");
        let two = not_retyped(&["a".to_owned(), "b".to_owned()]);
        assert!(two.starts_with("`a` and `b` are defined already"), "{two}");
        assert!(
            two.contains("without the statements that typed them in"),
            "{two}"
        );
        assert!(two.ends_with("Use `a` and `b` as they are."), "{two}");
    }

    #[test]
    fn templates_fill_their_placeholders() {
        let prompt = system("df: DataFrame (3 rows)", &["df = load()".to_owned()], &[]);
        assert!(prompt.contains("## Live namespace\ndf: DataFrame (3 rows)"));
        assert!(prompt.contains("```python\ndf = load()\n```"));
        // What changes between requests comes last: the instructions and the
        // toolbox are a prefix that requests with other namespaces share.
        assert!(
            prompt.find("peek(") < prompt.find("df: DataFrame"),
            "{prompt}"
        );
        type Build = fn(&str, &[String]) -> String;
        let builders: [Build; 3] = [
            |n, r| system(n, r, &[]),
            |n, r| planner(n, r, &[], Some(&[("df".into(), "df: 3 rows".into())])),
            |n, r| triage_plan(n, r, &[], "- default: code", "default"),
        ];
        for build in builders {
            let prompt = build("df: DataFrame (3 rows)", &["df = load()".to_owned()]);
            let other = build("s: Series (2)", &[]);
            let shared = prompt
                .bytes()
                .zip(other.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            assert!(
                prompt[..shared].contains("delete(path)"),
                "{}",
                &prompt[..shared]
            );
            assert!(prompt.contains("## Live namespace\ndf: DataFrame (3 rows)"));
        }
        assert!(!prompt.contains("{namespace}") && !prompt.contains("{recent_cells}"));
        assert!(system("", &[], &[]).contains("(no user variables yet)"));
        assert!(!reflect().contains("{request}") && !reflect().contains("{answer_field}"));
        assert!(reflect().contains("(never invented); empty when the output says it all\"}"));
        let prompt = explain("why?", "df: DataFrame");
        assert!(prompt.contains("df: DataFrame"), "{prompt}");
        assert!(!prompt.contains("{namespace}") && !prompt.contains("{recent_cells}"));
        // Questions asked as the next turn of a conversation: no placeholders.
        for question in [PLAN, EVALUATE, EXPLAIN_RESULTS] {
            for placeholder in ["{request}", "{namespace}", "{recent_cells}"] {
                assert!(!question.contains(placeholder), "{question}");
            }
        }
    }

    #[test]
    fn the_toolbox_lists_every_tool_and_the_installed_skills() {
        let skills = [("debug".to_owned(), "Debug a failing cell".to_owned())];
        let prompt = system("", &[], &skills);
        for tool in [
            "peek(",
            "grep(",
            "partition(",
            "rlm(",
            "read(",
            "edit(",
            "create(",
            "skill(",
        ] {
            assert!(prompt.contains(tool), "{tool} missing");
        }
        assert!(prompt.contains("- debug: Debug a failing cell"));
        assert!(toolbox(&[]).contains("(none installed)"));
        assert!(!prompt.contains("{skills}"));
    }

    #[test]
    fn nothing_of_one_kernel_is_in_the_prefix_every_kernel_shares() {
        // The shared local model server caches the longest prefix a request
        // shares with one before it: the instructions and the toolbox are
        // the same for every kernel and request; skills (a project's own
        // folder), the namespace and the cells come after them.
        let one = system("df: DataFrame (3 rows)", &["df = load()".to_owned()], &[]);
        let skills = [("report".to_owned(), "Write the report".to_owned())];
        let other = system("", &[], &skills);
        let stable = format!(
            "{}\n\n{}",
            SYSTEM.trim_end(),
            TOOLBOX.split("{skills}").next().unwrap()
        );
        assert!(one.starts_with(&stable) && other.starts_with(&stable));
        assert!(!stable.contains('{'), "no placeholder in the shared prefix");
    }

    #[test]
    fn feedback_messages_carry_reasoning_and_next_step() {
        let text = not_done_yet("no plot yet", "draw the histogram");
        assert!(text.contains("no plot yet") && text.contains("draw the histogram"));
        let failed = execution_report(ReportedCode::Written("1/0"), "ZeroDivisionError", true, &[]);
        assert!(failed.starts_with("This code failed:\n```python\n1/0\n```"));
        let assigned = execution_report(
            ReportedCode::Written("x = 1"),
            "",
            false,
            &["x: int = 1 (new)".to_owned()],
        );
        assert!(assigned.contains("(no output)"));
        assert!(
            assigned.ends_with("Variables it changed:\n- x: int = 1 (new)"),
            "{assigned}"
        );
    }

    #[test]
    fn the_review_reads_no_printout_for_code_that_printed_nothing() {
        let execution = |code: &str, output: &str| Execution {
            code: code.to_owned(),
            output: output.to_owned(),
            shown: None,
            failed: false,
            finished: false,
            changes: vec!["grid: ndarray shape (3, 4) dtype int64 (new)".to_owned()],
            rich_outputs: 0,
            images: Vec::new(),
        };
        let silent = execution("grid = flat.reshape(3, 4)", " \n");
        let review = review_request("Reshape flat into grid.", &[&silent]);
        assert!(
            review.ends_with(
                "grid = flat.reshape(3, 4)\n```\n\nVariables after it ran:\n\
                 grid: ndarray shape (3, 4) dtype int64 (new)\n"
            ),
            "{review}"
        );
        assert!(!review.contains("printed"), "{review}");
        let printing = execution("print(grid.shape)", "(3, 4)\n");
        let review = review_request("Reshape flat into grid.", &[&printing]);
        assert!(
            review.contains("```\nIt printed:\n(3, 4)\n\nVariables after it ran:"),
            "{review}"
        );
    }

    #[test]
    fn a_report_below_the_answer_names_the_block_instead_of_repeating_it() {
        let only = execution_report(ReportedCode::Above { index: 0, of: 1 }, "6\n", false, &[]);
        assert_eq!(only, "Your code ran.\nOutput:\n```\n6\n\n```");
        let second = execution_report(
            ReportedCode::Above { index: 1, of: 3 },
            "KeyError: 'b'",
            true,
            &[],
        );
        assert!(second.starts_with("Your block 2 of 3 failed."), "{second}");
        assert!(!second.contains("```python"), "{second}");
    }
}
