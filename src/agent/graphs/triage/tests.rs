//! The triage graph, run with scripted effects.

use super::pre_plan::textual_plan;
use super::*;
use crate::agent::graph::RunEnd;
use crate::agent::parse::action::tool_call;
use crate::agent::parse::triage::{parse_classification, parse_plan};
use crate::agent::run::{Agent, AgentEvent, Context, Execution, ModelChoice, Outcome};
use crate::agent::script::{Script, fails_once, latest, ok};

const DONE: &str = r#"{"is_complete": true, "reasoning": "met", "next_action": ""}"#;
const ONE_VALUE: &str = r#"{"form": "one number"}"#;
const NOT_DONE: &str =
    r#"{"is_complete": false, "reasoning": "no chart yet", "next_action": "plot it"}"#;
const UNSURE: &str = r#"{"agent": "planner", "confidence": 0.4}"#;

/// Answers Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, llama.cpp server,
/// temperature 0) wrote with the classification and plan schemas.
const RECORDED_LOCAL_CLASSIFICATION: &str =
    "{\n  \"agent\": \"default\",\n  \"confidence\": 0.9\n}";
const RECORDED_LOCAL_RESPOND: &str = "{\n  \"action\": \"respond\",\n  \"reasoning\": \"Hello! How can I assist you today? Is there something specific you'd like to know or discuss? I'm here to help with any questions or tasks you might have. Let me know how I can assist you.\",\n  \"response\": \"Hello! How can I assist you today? Is there something specific you'd like to know or discuss? I'm here to help with any questions or tasks you might have. Let me know how I can assist you.\"\n}";
const RECORDED_LOCAL_TOOL: &str = "{\n  \"action\": \"tool\",\n  \"reasoning\": \"To load data from a CSV file and plot the price column, you can use Python's pandas library for data manipulation and matplotlib for plotting. Here's a step-by-step guide on how to do it:\",\n  \"tool\": \"peek\",\n  \"input\": \"data.csv\"\n}";

#[test]
fn answers_recorded_from_the_local_model_with_the_schemas() {
    assert_eq!(
        parse_classification(RECORDED_LOCAL_CLASSIFICATION, WITHOUT_CLAUDE),
        Some((Agent::Default, 0.9))
    );
    match parse_plan(RECORDED_LOCAL_RESPOND, "hello there!", WITHOUT_CLAUDE) {
        Decision::Respond(text) => assert!(text.starts_with("Hello! How can I assist you")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_plan(RECORDED_LOCAL_TOOL, "plot data.csv", WITHOUT_CLAUDE),
        Decision::Tool {
            code: format!("print({})", tool_call("peek", "data.csv")),
        }
    );
}

fn settings(execute: bool) -> NodeSettings {
    NodeSettings {
        execute,
        ..NodeSettings::for_tests()
    }
}

const WITHOUT_CLAUDE: Agents = Agents { claude: false };
const WITH_CLAUDE: Agents = Agents { claude: true };

fn run(script: &mut Script, request: &str, reviews: u32, execute: bool) -> AgentState {
    run_with(script, request, reviews, execute, WITHOUT_CLAUDE)
}

fn run_with(
    script: &mut Script,
    request: &str,
    reviews: u32,
    execute: bool,
    agents: Agents,
) -> AgentState {
    let mut state = AgentState::new(request, Vec::new(), reviews);
    let graph = triage_graph::<Script>(settings(execute), reviews, agents);
    let end = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(graph.run(&mut state, script))
        .unwrap();
    assert!(matches!(end, RunEnd::Finished { .. }), "{end:?}");
    state
}

fn context() -> Context {
    Context {
        variables: vec!["df".into(), "s".into()],
        last_error: Some("1/0\n\nZeroDivisionError: division by zero".into()),
    }
}

fn statuses(script: &Script) -> Vec<String> {
    script
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Status(line) => Some(line.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn plain_requests_are_planned_from_their_words() {
    let tool = |request: &str| match textual_plan(request, &context()) {
        Some(Decision::Tool { code }) => code,
        other => panic!("{request}: {other:?}"),
    };
    assert_eq!(tool("describe df"), "print(describe(df))");
    assert_eq!(tool("Please show `df`."), "display(df)");
    assert!(tool("plot s").contains("s.plot() if hasattr(s, 'plot') else plt.plot(s)"));
    assert_eq!(
        tool("read data/notes.txt"),
        r#"print(read("data/notes.txt"))"#
    );
    assert_eq!(tool("open notes.txt"), r#"print(read("notes.txt"))"#);
    assert!(matches!(
        textual_plan("Thanks!", &context()),
        Some(Decision::Respond(reply)) if reply == "You're welcome."
    ));
    let Some(Decision::Delegate { agent, task }) =
        textual_plan("Explain the last error", &context())
    else {
        panic!("the last error goes to an agent");
    };
    assert_eq!(agent, Agent::Default);
    assert!(task.starts_with("Explain the last error\n") && task.contains("ZeroDivisionError"));
    for unplanned in [
        "describe nothing_here",
        "show me the data",
        "plot the prices by month",
        "read",
        "what is a list?",
    ] {
        assert_eq!(textual_plan(unplanned, &context()), None, "{unplanned}");
    }
    // Without a failed cell there is no error to explain.
    let clean = Context::default();
    assert_eq!(textual_plan("explain the last error", &clean), None);
}

#[test]
fn odd_requests_and_answers_never_panic() {
    for text in [
        "",
        " ",
        "please",
        "Please ",
        "please show",
        "show",
        "show ✓",
        "read .",
        "read /",
        "plot 日本",
        "?!.",
        "explain the last error",
        "hi!!!",
        "describe `",
        "open a.b.c",
    ] {
        let _ = textual_plan(text, &context());
        let _ = parse_plan(text, "req", WITHOUT_CLAUDE);
        let _ = parse_classification(text, WITHOUT_CLAUDE);
    }
    for answer in [
        r#"{"action": "tool", "tool": "peek", "input": {"text": "x"}}"#,
        r#"{"action": null}"#,
        r#"{"agent": "default", "confidence": "high"}"#,
        r#"{"agent": "default", "confidence": -1e308}"#,
    ] {
        let _ = parse_plan(answer, "req", WITHOUT_CLAUDE);
        let _ = parse_classification(answer, WITHOUT_CLAUDE);
    }
}

#[test]
fn classifications_and_plans_are_read_leniently() {
    assert_eq!(
        parse_classification(
            r#"Sure: {"agent": "analyst", "confidence": 0.93}"#,
            WITHOUT_CLAUDE
        ),
        Some((Agent::Analyst, 0.93))
    );
    assert_eq!(
        parse_classification(
            r#"{"agent": "agent:planner", "confidence": "95%"}"#,
            WITHOUT_CLAUDE
        ),
        Some((Agent::Planner, 0.95))
    );
    assert_eq!(
        parse_classification(r#"{"agent": "planner"}"#, WITHOUT_CLAUDE),
        None
    );
    assert_eq!(
        parse_classification(r#"{"agent": "nobody", "confidence": 1}"#, WITHOUT_CLAUDE),
        None
    );

    let plan = r#"{"action": "delegate", "agent": "analyst", "task": "explain the trend"}"#;
    assert_eq!(
        parse_plan(plan, "req", WITHOUT_CLAUDE),
        Decision::Delegate {
            agent: Agent::Analyst,
            task: "explain the trend".into()
        }
    );
    let plan = r#"```json
{"action": "tool", "tool": "describe", "input": "df"}
```"#;
    assert_eq!(
        parse_plan(plan, "req", WITHOUT_CLAUDE),
        Decision::Tool {
            code: "print(describe(df))".into()
        }
    );
    assert_eq!(
        parse_plan(
            r#"{"action": "respond", "response": "Hi!"}"#,
            "req",
            WITHOUT_CLAUDE
        ),
        Decision::Respond("Hi!".into())
    );
    // Several calls in order; one the toolbox lacks is left out.
    let plan = r#"{"action": "tools", "tool_calls": [{"tool": "read", "input": "'a.txt'"}, {"tool": "rm_rf", "input": "'/'"}, {"tool": "grep_files", "input": "'TODO'"}]}"#;
    assert_eq!(
        parse_plan(plan, "req", WITHOUT_CLAUDE),
        Decision::Tool {
            code: "print(read('a.txt'))\nprint(grep_files('TODO'))".into()
        }
    );
    assert_eq!(
        parse_plan(
            r#"{"action": "done", "response": "", "reasoning": "x is 3 already"}"#,
            "req",
            WITHOUT_CLAUDE
        ),
        Decision::Done("x is 3 already".into())
    );
    let fallback = Decision::Delegate {
        agent: Agent::Default,
        task: "req".into(),
    };
    for unreadable in [
        r#"{"action": "tools", "tool_calls": [{"tool": "rm_rf", "input": "/"}]}"#,
        "no idea",
        r#"{"action": "tool", "tool": "rm_rf", "input": "/"}"#,
        r#"{"action": "respond", "response": ""}"#,
        r#"{"action": "delegate", "agent": "nobody"}"#,
    ] {
        assert_eq!(
            parse_plan(unreadable, "req", WITHOUT_CLAUDE),
            fallback,
            "{unreadable}"
        );
    }
}

#[test]
fn the_claude_agent_is_chosen_only_when_installed() {
    let classification = r#"{"agent": "claude", "confidence": 0.95}"#;
    assert_eq!(parse_classification(classification, WITHOUT_CLAUDE), None);
    assert_eq!(
        parse_classification(classification, WITH_CLAUDE),
        Some((Agent::Claude, 0.95))
    );
    let plan = r#"{"action": "delegate", "agent": "claude", "task": "fit a model"}"#;
    let to = |agents| match parse_plan(plan, "req", agents) {
        Decision::Delegate { agent, .. } => agent,
        other => panic!("{other:?}"),
    };
    assert_eq!(to(WITHOUT_CLAUDE), Agent::Default);
    assert_eq!(to(WITH_CLAUDE), Agent::Claude);
    assert!(!WITHOUT_CLAUDE.listed().contains("claude"));
    assert!(WITH_CLAUDE.listed().contains("- claude: "));
    assert_eq!(
        WITH_CLAUDE.choices(),
        r#""default" or "analyst" or "planner" or "claude""#
    );
}

#[test]
fn work_handed_to_claude_goes_to_the_cli_and_its_check_of_the_request_stands() {
    let mut script = Script::new(
        &[
            r#"{"agent": "claude", "confidence": 0.95}"#,
            "```python\nprint(6*7)\n```",
            DONE, // the default graph's own check, by the CLI
        ],
        ok,
    );
    let state = run_with(&mut script, "fit a model", 3, true, WITH_CLAUDE);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(script.executed, ["print(6*7)"]);
    use ModelChoice::{ClaudeCli, Configured};
    assert_eq!(script.models, [Configured, ClaudeCli, ClaudeCli]);
    // Its verdict shows once, and what it checked stands.
    let verdicts = script
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Verdict(_)))
        .count();
    assert_eq!(verdicts, 1);
    assert_eq!(state.checked, ["the printed output"]);
    assert!(
        statuses(&script)
            .contains(&"triage: the claude agent takes it (confidence 0.95)".to_owned())
    );
    let question = &script.requests[0]
        .messages
        .last()
        .expect("a question")
        .content;
    assert!(question.contains("- claude: "));
}

#[test]
fn a_plain_request_runs_its_tool_without_planning_and_is_reviewed() {
    let mut script = Script::new(&[DONE], ok);
    let state = run(&mut script, "describe x", 3, true);
    assert_eq!(script.nodes, ["pre_plan", "tool", "review"]);
    assert_eq!(script.executed, ["print(describe(x))"]);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(
        statuses(&script),
        ["triage: runs print(describe(x)) (no model call)"]
    );
    // The review saw what the tool printed.
    let review = &script.requests[0];
    assert!(review.messages.last().unwrap().content.contains("42"));
}

#[test]
fn a_greeting_is_answered_without_any_model_call() {
    let mut script = Script::new(&[], ok);
    let state = run(&mut script, "hello", 3, true);
    assert_eq!(script.nodes, ["pre_plan", "respond"]);
    assert!(script.requests.is_empty());
    assert_eq!(state.outcome, Some(Outcome::Answered));
    assert!(state.answer.starts_with("Hello!"));
}

#[test]
fn a_confident_classification_hands_the_work_to_that_agent() {
    let mut script = Script::new(
        &[
            r#"{"agent": "default", "confidence": 0.97}"#,
            "```python\nprint(6*7)\n```",
            DONE, // the default graph's own reflection
            DONE, // the triage review
        ],
        ok,
    );
    let state = run(&mut script, "compute six times seven", 3, true);
    assert_eq!(
        script.nodes,
        [
            "pre_plan", "classify", "delegate", "generate", "extract", "execute", "reflect",
            "review"
        ]
    );
    assert_eq!(script.executed, ["print(6*7)"]);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.turn, 1);
    assert_eq!(state.max_turns, 3, "the run's own limit is restored");
    // The classification was asked after the request, under the system
    // prompt the default agent's first turn then wrote code under.
    let (classify, generate) = (&script.requests[0], &script.requests[1]);
    let said: Vec<&str> = classify
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(said.iter().any(|m| m.contains("compute six times seven")));
    assert!(said.last().is_some_and(|m| m.contains("- planner:")));
    assert_eq!(classify.system, generate.system);
    assert!(
        generate
            .messages
            .iter()
            .all(|m| !m.content.contains("- planner:"))
    );
}

#[test]
fn an_unsure_classification_leads_to_a_plan_and_a_short_review_loop() {
    let mut script = Script::new(
        &[
            UNSURE,
            r#"{"action": "tool", "tool": "describe", "input": "x"}"#,
            NOT_DONE,
            UNSURE,
            r#"{"action": "delegate", "agent": "planner", "task": "sum x"}"#,
            "Final Answer: summed.",
            DONE, // the planner's check of its task
            DONE, // the triage's check of the request
        ],
        ok,
    );
    let state = run(&mut script, "sum up x over time", 3, true);
    assert_eq!(
        script.nodes,
        [
            "pre_plan", "classify", "plan", "tool", "review", "pre_plan", "classify", "plan",
            "delegate", "planner", "review"
        ]
    );
    assert_eq!(state.triage.reviews, 1);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    // The second plan was told why the first pass fell short.
    let second_plan = &script.requests[4];
    let told = latest(second_plan);
    assert!(
        told.contains("no chart yet") && told.contains("plot it"),
        "{told}"
    );
    // The planner was given the plan's task, and the request is restored.
    let planner = &script.requests[5];
    assert!(
        latest(planner).starts_with(&format!("{told}\n\nsum x")),
        "{}\n---\n{told}",
        latest(planner)
    );
    assert_eq!(
        planner
            .messages
            .first()
            .unwrap()
            .content
            .matches("sum up x")
            .count(),
        1
    );
    assert_eq!(state.request, "sum up x over time");
    assert_eq!(state.answer, "summed.");
}

#[test]
fn reviews_stop_at_the_limit_and_at_cannot_fix() {
    let plan = r#"{"action": "tool", "tool": "describe", "input": "x"}"#;
    let mut script = Script::new(&[UNSURE, plan, NOT_DONE, UNSURE, plan, NOT_DONE], ok);
    let state = run(&mut script, "sum up x over time", 2, true);
    assert_eq!(state.outcome, Some(Outcome::MaxTurns));
    assert_eq!(state.triage.reviews, 2);

    // "Cannot be done" of a pass that ran without failing gets one more
    // pass, as under the default graph; said again, it is believed.
    let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "no such file", "next_action": ""}"#;
    let mut script = Script::new(&[UNSURE, plan, cannot, UNSURE, plan, cannot], ok);
    let state = run(&mut script, "sum up x over time", 5, true);
    assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
    assert_eq!(state.triage.reviews, 1);
    assert_eq!(script.nodes.last(), Some(&"review"));
    // After a pass that failed, it is believed at once.
    let failing = r#"{"action": "tool", "tool": "describe", "input": "1/0"}"#;
    let mut script = Script::new(&[UNSURE, failing, cannot], fails_once);
    let state = run(&mut script, "sum up x over time", 5, true);
    assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
    assert_eq!(state.triage.reviews, 0);
}

#[test]
fn the_one_doubt_of_cannot_fix_is_left_to_the_triage_by_a_planner_it_handed_work() {
    let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "a warning", "next_action": ""}"#;
    let plan = r#"{"action": "tool", "tool": "describe", "input": "x"}"#;
    let store = r#"{"action": "delegate", "agent": "planner", "task": "store it"}"#;
    let mut script = Script::new(
        &[
            UNSURE,
            store,
            "Action: python\nAction Input:\n```python\nprint(3)\n```",
            "Final Answer: stored.",
            cannot, // the planner's check: never believed there
            "Final Answer: stored.",
            DONE,
            cannot, // the triage's review: doubted once
            UNSURE,
            plan,
            cannot, // and then believed
        ],
        ok,
    );
    let state = run(&mut script, "sum up x over time", 5, true);
    assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
    assert_eq!(state.triage.reviews, 1);
    assert_eq!(script.executed, ["print(3)", "print(describe(x))"]);
}

#[test]
fn a_missing_variable_the_request_names_is_reviewed_without_a_judge() {
    let plan = r#"{"action": "tool", "tool": "describe", "input": "x"}"#;
    let store = r#"{"action": "delegate", "agent": "planner", "task": "store it"}"#;
    let mut script = Script::new(
        &[
            UNSURE,
            plan,
            UNSURE,
            store,
            "Action: python\nAction Input:\n```python\ntotal = 3\n```",
            "Final Answer: stored.",
            DONE, // the planner's check of its task ("store it")
            ONE_VALUE,
            DONE, // the triage's check of the request, with `total`
        ],
        ok,
    );
    let state = run(&mut script, "Sum up x; store it in `total`.", 3, true);
    // The first pass made nothing: not done, told why, with no judge call.
    let verdict = script.events.iter().find_map(|e| match e {
        AgentEvent::Verdict(v) => Some(v),
        _ => None,
    });
    assert!(
        verdict.is_some_and(|v| !v.is_complete && v.reasoning == "`total` does not exist yet"),
        "{verdict:?}"
    );
    assert_eq!(state.triage.reviews, 1);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.checked, ["total: int: 3"]);
}

#[test]
fn a_plan_that_calls_work_the_check_sent_back_done_answers_without_claiming_it() {
    let plan = r#"{"action": "tool", "tool": "describe", "input": "x"}"#;
    let done = r#"{"action": "done", "response": "x is described above.", "reasoning": "met"}"#;
    let mut script = Script::new(&[UNSURE, plan, NOT_DONE, UNSURE, done], ok);
    let state = run(&mut script, "sum up x over time", 3, true);
    assert_eq!(script.nodes.last(), Some(&"respond"));
    assert_eq!(state.outcome, Some(Outcome::Answered));
    assert_eq!(state.answer, "x is described above.");
}

fn fails_without_numpy(code: &str) -> Execution {
    let failed = !code.starts_with("import numpy");
    Execution {
        code: code.into(),
        output: if failed {
            "NameError: name 'np' is not defined".into()
        } else {
            "[1. 2.]".into()
        },
        shown: None,
        failed,
        finished: false,
        changes: Vec::new(),
        rich_outputs: 0,
        images: Vec::new(),
    }
}

#[test]
fn a_known_failure_is_repaired_without_the_model_then_reviewed() {
    let plan = r#"{"action": "tool", "tool": "peek", "input": "np.ones(2)"}"#;
    let mut script = Script::new(&[UNSURE, plan, DONE], fails_without_numpy);
    let state = run(&mut script, "ones", 3, true);
    assert_eq!(
        script.nodes,
        ["pre_plan", "classify", "plan", "tool", "repair", "review"]
    );
    assert_eq!(
        script.executed,
        [
            "print(peek(np.ones(2)))",
            "import numpy as np\nprint(peek(np.ones(2)))"
        ]
    );
    assert!(statuses(&script).contains(&"repair: added import numpy as np".to_owned()));
    // The review sees the failure and the repaired code with its output.
    let review = latest(&script.requests[2]);
    assert!(
        review.contains("(it failed)")
            && review.contains("import numpy as np\nprint(peek")
            && review.contains("[1. 2.]"),
        "{review}"
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn the_review_after_an_agents_answer_checks_that_answer_and_is_not_kept() {
    let mut script = Script::new(
        &[
            r#"{"agent": "analyst", "confidence": 0.99}"#,
            r#"{"needs_code": false, "needs_evaluation": false}"#,
            "A list is ordered.",
            DONE,
        ],
        ok,
    );
    let state = run(&mut script, "what is a list?", 3, true);
    let review = latest(script.requests.last().unwrap());
    assert!(
        review.contains("Nothing ran.")
            && review.contains("answer given to the user:\nA list is ordered."),
        "{review}"
    );
    assert_eq!(
        state.conversation.last().unwrap().content,
        "A list is ordered."
    );
    assert_eq!(state.outcome, Some(Outcome::Answered));
}

#[test]
fn no_exec_shows_the_tool_call_and_stops() {
    let mut script = Script::new(&[], ok);
    let state = run(&mut script, "describe x", 3, false);
    assert_eq!(script.nodes, ["pre_plan", "tool"]);
    assert!(script.executed.is_empty());
    assert_eq!(state.outcome, Some(Outcome::Answered));
}
