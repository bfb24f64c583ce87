//! The agent's toolbox through the kernel, with a scripted model over real
//! HTTP: tools at hand in agent code (and only there), their errors reaching
//! the model as Python errors, file writes asking first under `--confirm`,
//! an edited module reloaded, and skills in the system prompt.

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{
    Channel, Kernel, panel_texts, parent_id, result_text, stream_text, told_model,
};

const DONE: &str = r#"{"is_complete": true, "reasoning": "done", "next_action": ""}"#;

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_calls_the_tools_without_importing_them() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nprint(grep(log, 'ERROR'))\nparts = partition(log, 2)\nprint(len(parts), peek(log, 5))\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("log = '\\n'.join(['ok'] * 3 + ['ERROR disk full'] + ['ok'] * 3000)")
        .await;
    let (reply, iopub) = kernel.execute("%%ask\nwhat went wrong?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let output = &panel_texts(&iopub, "output")[0];
    assert!(output.contains("4: ERROR disk full"), "{output}");
    assert!(output.contains("2 ok\nok\n"), "{output}");
    // The prompt lists the tools and points at them for the large value.
    let system = {
        let requests = llm.requests.lock().unwrap();
        told_model(&requests[0])
    };
    assert!(
        system.contains("grep(text, pattern, context=0)"),
        "{system}"
    );
    assert!(
        system.contains("log: str len=9024") && system.contains("(large: explore it with peek"),
        "{system}"
    );
    // The user's own cells see no new names, but may import the tools.
    let (reply, _) = kernel.execute("grep").await;
    assert_eq!(reply.content["ename"], "NameError");
    let (_, iopub) = kernel
        .execute("from mahtab.tools import grep\ngrep(log, 'disk')")
        .await;
    // A list of the lines, shown numbered.
    assert_eq!(result_text(&iopub), "4: ERROR disk full");
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_finds_files_and_lines_in_the_working_directory() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(files('*.py'))\nprint(grep_files('TODO'))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel
        .execute(
            "import os, tempfile\n\
             os.chdir(tempfile.mkdtemp())\n\
             os.mkdir('lib')\n\
             with open('lib/notes.py', 'w') as f: f.write('# TODO: tests\\n')",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (reply, iopub) = kernel.execute("%%ask\nwhat is left to do?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let output = &panel_texts(&iopub, "output")[0];
    assert!(output.contains("lib/notes.py  (14 bytes)"), "{output}");
    assert!(output.contains("lib/notes.py:1: # TODO: tests"), "{output}");
    let system = llm.requests.lock().unwrap()[0]["messages"][0]["content"].to_string();
    assert!(system.contains("grep_files(pattern, glob="), "{system}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_errors_reach_the_model_as_python_errors_and_the_namespace_stays() {
    // Failed blocks go straight to the next turn; the missing file the
    // request names (an error another turn may not fix) is reviewed.
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nkept_by_agent = 1\nprint(grep(log, '(unclosed'))\n```".into()),
        Reply::Answer("```python\nedit('notes.txt', 'same', 'other')\n```".into()),
        Reply::Answer("```python\nprint(read('missing.txt'))\n```".into()),
        Reply::Answer(
            r#"{"is_complete": false, "cannot_fix": true, "reasoning": "no such file", "next_action": ""}"#
                .into(),
        ),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    std::fs::write(kernel.dir().join("notes.txt"), "same\nsame\n").unwrap();
    kernel.execute("log = 'a\\nb'\nmine = 'intact'").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nfind errors in log and in missing.txt")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let errors = panel_texts(&iopub, "error");
    assert_eq!(
        errors.len(),
        3,
        "{errors:?}\n{}",
        stream_text(&iopub, "stdout")
    );
    assert!(llm.last_message(3).contains("FileNotFoundError"));
    assert!(
        llm.last_message(1)
            .contains("missing ), unterminated subpattern")
    );
    assert!(
        llm.last_message(2).contains("occurs 2 times in notes.txt"),
        "{}",
        llm.last_message(2)
    );
    let notes = std::fs::read_to_string(kernel.dir().join("notes.txt")).unwrap();
    assert_eq!(notes, "same\nsame\n", "an ambiguous edit writes nothing");
    let (_, iopub) = kernel.execute("(mine, kept_by_agent)").await;
    assert_eq!(result_text(&iopub), "('intact', 1)");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edited_module_is_reloaded_for_the_user() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nprint(edit('settings_mod.py', 'LIMIT = 1', 'LIMIT = 5'))\nprint(read('settings_mod.py'))\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    std::fs::write(kernel.dir().join("settings_mod.py"), "LIMIT = 1\n").unwrap();
    let (_, iopub) = kernel
        .execute("import settings_mod\nsettings_mod.LIMIT")
        .await;
    assert_eq!(result_text(&iopub), "1");
    let (reply, iopub) = kernel.execute("%%ask\nraise the limit to 5").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let output = &panel_texts(&iopub, "output")[0];
    assert!(output.contains("(reloaded settings_mod)"), "{output}");
    assert!(output.contains("1| LIMIT = 5"), "{output}");
    let (_, iopub) = kernel.execute("settings_mod.LIMIT").await;
    assert_eq!(result_text(&iopub), "5");
}

#[tokio::test(flavor = "multi_thread")]
async fn confirm_asks_before_each_file_write() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nfor name in ('first', 'second'):\n    try:\n        print(create(name, 'x = 1\\n'))\n    except PermissionError as e:\n        print(e)\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "%%ask --confirm\nmake two modules", "allow_stdin": true }),
        )
        .await;
    let mut prompts = Vec::new();
    for answer in ["y", "n", "y"] {
        let request = kernel.next_stdin().await;
        assert_eq!(parent_id(&request), msg_id);
        prompts.push(request.content["prompt"].as_str().unwrap().to_owned());
        kernel.input_reply(&request, answer).await;
    }
    assert_eq!(
        prompts,
        [
            "Run this code? [y/N] ",
            "Allow the agent to create first.py? [y/N] ",
            "Allow the agent to create second.py? [y/N] ",
        ]
    );
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let iopub = kernel.iopub_for(&msg_id).await;
    let output = &panel_texts(&iopub, "output")[0];
    assert!(
        output.contains("the user declined: create first.py")
            && output.contains("created second.py"),
        "{output}"
    );
    assert!(!kernel.dir().join("first.py").exists());
    assert!(kernel.dir().join("second.py").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_listed_for_the_model_and_loaded_by_its_code() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(skill('tidy'))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let skills = kernel.dir().join("config/mahtab/skills");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(
        skills.join("tidy.md"),
        "Tidy a DataFrame\nDrop empty columns, then sort by the index.\n",
    )
    .unwrap();
    let (reply, iopub) = kernel.execute("%%ask\ntidy my data").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let system = {
        let requests = llm.requests.lock().unwrap();
        told_model(&requests[0])
    };
    assert!(system.contains("- tidy: Tidy a DataFrame"), "{system}");
    let output = &panel_texts(&iopub, "output")[0];
    assert!(output.contains("Drop empty columns"), "{output}");
    assert!(stream_text(&iopub, "stdout").contains("✓ done"));
}

/// Writes the skill `name` into the kernel's project (`.mahtab/skills/`).
fn project_skill(kernel: &Kernel, name: &str, text: &str) {
    let skills = kernel.dir().join(".mahtab/skills");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(skills.join(format!("{name}.md")), text).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_the_request_names_is_loaded_after_it() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Following it.".into()),
        Reply::Answer("Nothing to follow.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    project_skill(
        &kernel,
        "table-summary",
        "Summarise a table\n1. Print its shape.\n",
    );
    // Named in other words than the file's: case and spaces for hyphens.
    let (reply, _) = kernel
        .execute("%%ask\nUse the Table Summary skill on sales.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let told = llm.last_message(0);
    assert!(
        told.starts_with("Use the Table Summary skill on sales."),
        "{told}"
    );
    assert!(told.contains("The skill table-summary is loaded"), "{told}");
    assert!(told.contains("1. Print its shape."), "{told}");
    // A request that does not name it gets the list only.
    let (reply, _) = kernel.execute("%%ask\nSummarise sales.").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(!llm.last_message(1).contains("Print its shape"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_review_holds_the_work_to_the_steps_of_the_skill_the_request_names() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint((3, 2))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    project_skill(
        &kernel,
        "table-summary",
        "Summarise a table\n1. Print its shape.\n2. End with one sentence.\n",
    );
    let (reply, _) = kernel
        .execute("%%ask\nFollow the table-summary skill for sales.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let review = llm.last_message(1);
    assert!(
        review.contains("Follow the table-summary skill"),
        "{review}"
    );
    assert!(review.contains("2. End with one sentence."), "{review}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_claude_clis_sessions_are_text_to_grep() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(grep(claude_sessions(), 'parser'))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let home = crate::support::TempDir::new("claude-home");
    let project = home.0.join(".claude/projects/demo");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("s1.jsonl"),
        "{\"type\": \"user\", \"text\": \"fix the parser\"}\n",
    )
    .unwrap();
    let mut env = llm.env();
    env.push(("HOME", home.0.display().to_string()));
    let mut kernel = Kernel::start_with_env(&env).await;
    let (reply, iopub) = kernel.execute("%%ask\nwhat did I ask claude?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let output = &panel_texts(&iopub, "output")[0];
    assert!(
        output.contains("2: {\"type\": \"user\", \"text\": \"fix the parser\"}"),
        "{output}"
    );
}
