//! Model providers over real HTTP on loopback, in the Anthropic Messages
//! streaming format: through the kernel binary (`ANTHROPIC_API_KEY` and
//! `ANTHROPIC_BASE_URL` point it at the fake server) for what the user sees,
//! and directly against [`HttpProvider`] where the transport itself is the
//! subject (chunking, retry timing).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mahtab::agent::llm::http::{ApiKey, HttpProvider, WireFormat};
use mahtab::agent::llm::{ChatMessage, ChatRequest, LlmError, Usage};
use serde_json::json;
use tokio::sync::Notify;

use crate::fake_llm::{Event, FakeLlm, Reply, Step, anthropic};
use crate::support::{Channel, Kernel, is_panel, result_text, stream_text, types, without_status};
use mahtab::wire::Message;

/// What the fake server reports as usage, as the kernel's summary shows it.
fn usage_line() -> String {
    format!(
        "{} in / {} out tokens",
        anthropic::INPUT_TOKENS,
        anthropic::OUTPUT_TOKENS
    )
}

fn key() -> String {
    format!("sk-ant-test-{}", uuid::Uuid::new_v4())
}

fn provider(llm: &FakeLlm, key: &str) -> HttpProvider {
    HttpProvider::new(
        WireFormat::Anthropic,
        &llm.root_url,
        "fake-model",
        ApiKey::new(Some(key.into())),
    )
    .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "be brief".into(),
        messages: vec![ChatMessage::user("hi")],
        max_tokens: 100,
        sampling: Default::default(),
        schema: None,
        stop: &[],
        token_choices: false,
    }
}

/// Calls `provider`; returns the result and each piece of text as it came.
async fn chat(
    provider: &HttpProvider,
) -> (
    Result<mahtab::agent::llm::ChatOutcome, LlmError>,
    Vec<String>,
) {
    let mut pieces = Vec::new();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        provider.chat(request(), &mut |text| pieces.push(text.to_owned())),
    )
    .await
    .expect("the call ends");
    (result, pieces)
}

fn overloaded(status: u16) -> Reply {
    let (kind, message) = if status == 429 {
        ("rate_limit_error", "Rate limited")
    } else {
        ("overloaded_error", "Overloaded")
    };
    Reply::StatusWith(
        status,
        vec![("retry-after", "0".into())],
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}

/// Runs `code`; returns the reply and the cell's IOPub messages with the
/// time each was read.
async fn execute_timed(kernel: &mut Kernel, code: &str) -> (Message, Vec<(Instant, Message)>) {
    let msg_id = kernel
        .send(Channel::Shell, "execute_request", json!({ "code": code }))
        .await;
    let mut messages = Vec::new();
    loop {
        let message = kernel.next_for(&msg_id).await;
        let idle =
            message.header.msg_type == "status" && message.content["execution_state"] == "idle";
        messages.push((Instant::now(), message));
        if idle {
            break;
        }
    }
    (kernel.reply(Channel::Shell).await, messages)
}

fn panels(iopub: &[Message]) -> Vec<&Message> {
    iopub.iter().filter(|m| is_panel(m)).collect()
}

fn summary(iopub: &[Message]) -> String {
    let panels = panels(iopub);
    let last = panels.last().expect("a summary panel");
    assert_eq!(last.content["metadata"]["mahtab"]["kind"], "summary");
    last.content["data"]["text/plain"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_streams_text_and_reports_usage_with_the_right_headers() {
    let answer = "Forty-two is the answer: six times seven.";
    let llm = FakeLlm::start(vec![Reply::Answer(answer.into())]).await;
    let key = key();
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key)).await;
    let (reply, iopub) = kernel.execute("%%ask\nWhat is six times seven?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // Pieces of seven characters, coalesced into few messages, the line ended.
    assert_eq!(stream_text(&iopub, "stdout"), format!("{answer}\n"));
    let summary = summary(&iopub);
    assert!(
        summary.starts_with("answered · not checked · Anthropic fake-model · 1 turn")
            && summary.contains(&usage_line()),
        "{summary}"
    );
    assert_eq!(panels(&iopub).len(), 1, "no code, so only the summary");

    let heads = llm.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert_eq!(
        (heads[0].method.as_str(), heads[0].path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(heads[0].header("x-api-key"), Some(key.as_str()));
    assert_eq!(heads[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(heads[0].header("authorization"), None);
    assert_eq!(heads[0].header("content-type"), Some("application/json"));
    let body = llm.requests.lock().unwrap()[0].clone();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    // The system prompt as a text block with a cache breakpoint: it stays
    // the same for every call of a run, so later calls read it from cache.
    let system = &body["system"][0];
    assert_eq!(system["type"], "text");
    assert!(system["text"].as_str().unwrap().contains("Python"));
    assert_eq!(system["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["messages"][0]["role"], "user");
    for message in &iopub {
        assert!(!message.content.to_string().contains(&key));
    }
}

/// The Anthropic stream of `text` with `\r\n` line endings, cut before every
/// byte that continues a UTF-8 character, between every `\r` and its `\n`,
/// and in the middle of every `event:` and `data:` field name.
fn awkward_pieces(text: &str) -> Vec<Vec<u8>> {
    let stream = anthropic::answer(text).replace('\n', "\r\n").into_bytes();
    let mut cuts = Vec::new();
    for (at, &byte) in stream.iter().enumerate().skip(1) {
        let continuation = byte & 0xC0 == 0x80;
        let after_cr = stream[at - 1] == b'\r';
        let mid_field = stream[at..].starts_with(b"ent:") || stream[at..].starts_with(b"ta:");
        if continuation || after_cr || mid_field {
            cuts.push(at);
        }
    }
    let mut pieces = Vec::new();
    let mut from = 0;
    for at in cuts {
        pieces.push(stream[from..at].to_vec());
        from = at;
    }
    pieces.push(stream[from..].to_vec());
    pieces
}

const AWKWARD_TEXT: &str = "Grüße aus Köln — 世界 😀 naïve café\r\nend";

#[tokio::test(flavor = "multi_thread")]
async fn events_split_mid_line_mid_character_and_mid_crlf_through_the_kernel() {
    let pieces = awkward_pieces(AWKWARD_TEXT);
    assert!(pieces.len() > 50, "{} pieces", pieces.len());
    let steps = pieces.into_iter().map(Step::Write).collect();
    let llm = FakeLlm::start(vec![Reply::Steps(steps)]).await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    let (reply, iopub) = kernel.execute("%%ask\nsay hello").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(stream_text(&iopub, "stdout"), format!("{AWKWARD_TEXT}\n"));
    assert!(summary(&iopub).contains(&usage_line()));
}

#[tokio::test(flavor = "multi_thread")]
async fn any_chunking_of_the_stream_gives_the_same_answer() {
    let whole = anthropic::answer(AWKWARD_TEXT).replace('\n', "\r\n");
    let mut script = vec![Reply::Steps(
        awkward_pieces(AWKWARD_TEXT)
            .into_iter()
            .map(Step::Write)
            .collect(),
    )];
    for size in [1, 2, 3, 5] {
        let steps = whole
            .as_bytes()
            .chunks(size)
            .map(|c| Step::Write(c.to_vec()))
            .collect();
        script.push(Reply::Steps(steps));
    }
    let calls = script.len();
    let llm = FakeLlm::start(script).await;
    let provider = provider(&llm, &key());
    for call in 0..calls {
        let (result, pieces) = chat(&provider).await;
        let outcome = result.unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(outcome.text, AWKWARD_TEXT, "call {call}");
        assert_eq!(pieces.concat(), AWKWARD_TEXT, "call {call}");
        assert_eq!(
            outcome.usage,
            Usage {
                input_tokens: anthropic::INPUT_TOKENS,
                output_tokens: anthropic::OUTPUT_TOKENS,
                cost_usd: None,
                ..Default::default()
            }
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limited_then_overloaded_then_answered_shows_the_answer_once() {
    let answer = "Here it is, once.";
    let llm = FakeLlm::start(vec![
        overloaded(429),
        overloaded(529),
        Reply::Answer(answer.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    let (reply, iopub) = kernel.execute("%%ask\nanswer please").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
    // The waits are announced; the answer shows once.
    let text = stream_text(&iopub, "stdout");
    let notices: Vec<_> = text
        .lines()
        .filter(|l| l.contains("trying again in"))
        .collect();
    assert_eq!(notices.len(), 2, "{text}");
    assert!(notices[0].contains("rate_limit_error"), "{text}");
    assert!(notices[1].contains("overloaded_error"), "{text}");
    assert_eq!(text.matches(answer).count(), 1, "{text}");
    assert!(text.ends_with(&format!("{answer}\n")), "{text}");
    assert!(!types(&iopub).contains(&"error"));
    assert!(summary(&iopub).contains(&usage_line()));
}

#[tokio::test(flavor = "multi_thread")]
async fn always_overloaded_ends_in_a_readable_error_after_bounded_attempts() {
    let llm = FakeLlm::start(vec![overloaded(529); 5]).await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    kernel.execute("kept = 'still here'").await;
    let (reply, iopub) = kernel.execute("%%ask\nanswer please").await;
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["ename"], "AskError");
    assert_eq!(
        reply.content["evalue"],
        format!(
            "Anthropic is overloaded or rate-limited: overloaded_error: Overloaded \
             (gave up after {} attempts)",
            mahtab::agent::llm::http::ATTEMPTS
        )
    );
    assert_eq!(
        llm.requests.lock().unwrap().len(),
        mahtab::agent::llm::http::ATTEMPTS as usize
    );
    let retries = mahtab::agent::llm::http::ATTEMPTS as usize - 1;
    let mut expected = vec!["status", "execute_input"];
    expected.extend(std::iter::repeat_n("stream", retries));
    expected.extend(["error", "status"]);
    assert_eq!(types(&without_status(&iopub)), expected);
    let (reply, iopub) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
    let result = result_text(&iopub);
    assert_eq!(result, "2");
    let (reply, _) = kernel.execute("kept").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_waited_for_and_a_long_one_ends_the_call_at_once() {
    let llm = FakeLlm::start(vec![
        Reply::StatusWith(
            429,
            vec![("retry-after", "2".into())],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#.into(),
        ),
        Reply::Answer("after the wait".into()),
        Reply::StatusWith(
            429,
            vec![("retry-after", "3600".into())],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"come back later"}}"#
                .into(),
        ),
        Reply::Answer("never asked for".into()),
    ])
    .await;
    let provider = provider(&llm, &key());
    let (result, _) = chat(&provider).await;
    assert_eq!(result.unwrap().text, "after the wait");
    let events = llm.events();
    let at = |n| {
        events
            .iter()
            .find(|(_, e)| *e == Event::Request(n))
            .unwrap()
            .0
    };
    // The default first delay is 1 s; the server asked for 2.
    let waited = at(1) - at(0);
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");

    let (result, _) = chat(&provider).await;
    let error = result.unwrap_err();
    assert!(error.is_retryable());
    assert!(
        error
            .to_string()
            .ends_with("come back later (the server asks to retry in 3600 s)"),
        "{error}"
    );
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overloaded_event_is_retried_before_any_text_but_not_after() {
    let overloaded = anthropic::error("overloaded_error", "Overloaded");
    let llm = FakeLlm::start(vec![
        Reply::Steps(vec![Step::text(anthropic::start() + &overloaded)]),
        Reply::Answer("second try".into()),
        Reply::Steps(vec![Step::text(
            anthropic::start() + &anthropic::delta("Partial answ") + &overloaded,
        )]),
        Reply::Answer("must not be asked for".into()),
    ])
    .await;
    let provider = provider(&llm, &key());
    let (result, pieces) = chat(&provider).await;
    assert_eq!(result.unwrap().text, "second try");
    assert_eq!(pieces.concat(), "second try");
    assert_eq!(llm.requests.lock().unwrap().len(), 2);

    // Text was shown: a retry would show it twice, so the call fails.
    let (result, pieces) = chat(&provider).await;
    assert_eq!(
        result.unwrap_err().to_string(),
        "Anthropic is overloaded or rate-limited: overloaded_error: Overloaded"
    );
    assert_eq!(pieces.concat(), "Partial answ");
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_before_message_stop_is_an_error_not_an_answer() {
    let llm = FakeLlm::start(vec![Reply::Steps(vec![Step::text(
        anthropic::start() + &anthropic::delta("```python\nx = compute("),
    )])])
    .await;
    let (result, pieces) = chat(&provider(&llm, &key())).await;
    assert_eq!(
        result.unwrap_err().to_string(),
        "Anthropic failed: the stream ended before the answer was complete"
    );
    assert_eq!(pieces.concat(), "```python\nx = compute(");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_silent_past_the_idle_timeout_fails_and_a_slow_one_does_not() {
    let idle = Duration::from_millis(800);
    let llm = FakeLlm::start(vec![
        Reply::Stall("Hel".into(), Duration::from_secs(30)),
        // Each pause is shorter than the idle timeout; together they are longer.
        Reply::Steps(vec![
            Step::text(anthropic::start() + &anthropic::delta("slow ")),
            Step::Pause(Duration::from_millis(300)),
            Step::text(anthropic::delta("but ")),
            Step::Pause(Duration::from_millis(300)),
            Step::text(anthropic::delta("alive")),
            Step::Pause(Duration::from_millis(300)),
            Step::text(anthropic::end()),
        ]),
    ])
    .await;
    let provider = provider(&llm, &key()).with_idle_timeout(idle);

    let (result, pieces) = chat(&provider).await;
    assert_eq!(
        result.unwrap_err().to_string(),
        "Anthropic failed: no data for 800 ms"
    );
    assert_eq!(pieces.concat(), "Hel");

    let (result, pieces) = chat(&provider).await;
    assert_eq!(result.unwrap().text, "slow but alive");
    assert_eq!(pieces.concat(), "slow but alive");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_event_mid_stream_is_a_readable_error_and_the_namespace_stays() {
    let llm = FakeLlm::start(vec![Reply::Steps(vec![
        Step::text(anthropic::start() + &anthropic::delta("Working on it")),
        Step::text(anthropic::error("api_error", "Internal server error")),
    ])])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    kernel.execute("x = 41").await;
    let (reply, iopub) = kernel.execute("%%ask\nadd one to x").await;
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["ename"], "AskError");
    assert_eq!(
        reply.content["evalue"],
        "Anthropic failed: api_error: Internal server error"
    );
    // The partial text (its line ended) stays, then the error; no panels.
    let quiet = without_status(&iopub);
    let mut kinds = types(&quiet);
    kinds.dedup();
    assert_eq!(
        kinds,
        ["status", "execute_input", "stream", "error", "status"]
    );
    assert_eq!(stream_text(&iopub, "stdout"), "Working on it\n");
    let error = iopub.iter().find(|m| m.header.msg_type == "error").unwrap();
    assert_eq!(error.content["evalue"], reply.content["evalue"]);
    let (_, iopub) = kernel.execute("x + 1").await;
    let result = result_text(&iopub);
    assert_eq!(result, "42");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_stream_shows_its_text_while_it_is_still_arriving() {
    let pieces = ["One, ", "two, ", "three, ", "four, ", "five."];
    let mut steps = vec![Step::text(anthropic::start())];
    for piece in pieces {
        steps.push(Step::text(anthropic::delta(piece)));
        steps.push(Step::Pause(Duration::from_millis(150)));
    }
    steps.push(Step::text(anthropic::end()));
    let last_delta = steps.len() - 3;
    let llm = FakeLlm::start(vec![Reply::Steps(steps)]).await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    let (reply, timed) = execute_timed(&mut kernel, "%%ask\ncount to five").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let iopub: Vec<Message> = timed.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(
        stream_text(&iopub, "stdout"),
        format!("{}\n", pieces.concat())
    );

    let server = llm.events();
    let wrote = |step| {
        server
            .iter()
            .find(|(_, e)| *e == Event::Wrote { request: 0, step })
            .expect("the server wrote every step")
            .0
    };
    let streams: Vec<Instant> = timed
        .iter()
        .filter(|(_, m)| m.header.msg_type == "stream")
        .map(|(at, _)| *at)
        .collect();
    let last_written = wrote(last_delta);
    assert!(
        streams[0] < last_written,
        "the first text arrived {:?} after the last piece was written",
        streams[0] - last_written
    );
    let early = streams.iter().filter(|at| **at < last_written).count();
    assert!(
        early >= 2,
        "{early} of {} stream messages before the last piece",
        streams.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn text_written_just_before_a_pause_is_shown_during_the_pause() {
    let gate = Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![Reply::Steps(vec![
        Step::text(anthropic::start() + &anthropic::delta("Alpha ")),
        Step::text(anthropic::delta("Beta ")),
        Step::Gate(gate.clone()),
        Step::text(anthropic::delta("Gamma") + &anthropic::end()),
    ])])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "%%ask\ngreek letters" }),
        )
        .await;
    // The server holds the rest of the stream until the test has seen both
    // pieces written before the gate.
    let mut shown = String::new();
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        while !shown.contains("Alpha Beta") {
            let message = kernel.next_for(&msg_id).await;
            if message.header.msg_type == "stream" {
                shown.push_str(message.content["text"].as_str().unwrap());
            }
        }
    })
    .await;
    gate.notify_one();
    assert!(
        seen.is_ok(),
        "during the pause the cell shows only {shown:?}"
    );
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_closes_the_anthropic_connection_at_once() {
    let llm = FakeLlm::start(vec![Reply::Steps(vec![
        Step::text(anthropic::start() + &anthropic::delta("Thinking")),
        Step::Hold,
    ])])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env(&key())).await;
    let (_, first) = kernel
        .execute_until("%%ask\ntake your time", "stream")
        .await;
    assert_eq!(first.content["text"], "Thinking");
    let interrupted = Instant::now();
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let closed = llm
        .wait_for(Event::Closed(0), Duration::from_secs(3))
        .await
        .expect("the server sees the connection closed within 3 s of the interrupt");
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    // One line, the run's summary: no traceback into the kernel's own code.
    assert_eq!(
        reply.content["traceback"],
        json!(["\u{1b}[31mKeyboardInterrupt: the %%ask run was interrupted\u{1b}[39m"])
    );
    assert!(closed > interrupted);
    assert!(!llm.events().iter().any(|(_, e)| *e == Event::Ended(0)));
    let (reply, _) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_key_never_appears_in_any_message_or_the_log() {
    let key = key();
    let echoed = json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key: {key}")}});
    let llm = FakeLlm::start(vec![
        Reply::Answer("Hello.".into()),
        overloaded(429),
        Reply::Answer("Hello again.".into()),
        Reply::Status(401, echoed.to_string()),
    ])
    .await;
    let mut env = llm.anthropic_env(&key);
    env.push(("MAHTAB_LOG", "debug".into()));
    let mut kernel = Kernel::start_with_env(&env).await;
    let mut stderr = kernel.take_stderr().expect("the kernel's stderr");
    let log = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });

    let mut all = Vec::new();
    for code in ["%%ask\nhello", "%%ask\nhello again", "%%ask\nonce more"] {
        let (reply, iopub) = kernel.execute(code).await;
        all.push(reply);
        all.extend(iopub);
    }
    assert_eq!(all[0].content["status"], "ok");
    let failed = all
        .iter()
        .find(|m| m.header.msg_type == "execute_reply" && m.content["status"] == "error")
        .expect("the 401 fails its cell");
    assert_eq!(
        failed.content["evalue"],
        "Anthropic returned HTTP 401: authentication_error: invalid x-api-key: <key>"
    );
    for message in &all {
        assert!(
            !message.content.to_string().contains(&key),
            "{} carries the key",
            message.header.msg_type
        );
    }
    for head in llm.heads.lock().unwrap().iter() {
        assert_eq!(head.header("x-api-key"), Some(key.as_str()));
    }

    kernel.shutdown(false).await;
    let log = log.join().unwrap();
    // The log is really there: the retry was logged.
    assert!(log.contains("retrying"), "{log}");
    assert!(!log.contains(&key), "the log carries the key");
}

/// One OpenAI-format SSE chunk with `text`, and `finish_reason` when given.
fn openai_chunk(text: &str, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{ "index": 0, "delta": { "content": text }, "finish_reason": finish }],
    });
    format!("data: {chunk}\n\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_stream_is_complete_at_its_finish_reason_and_cut_without_one() {
    let llm = FakeLlm::start(vec![
        // Finished, then closed without `[DONE]` (some servers): complete.
        Reply::Steps(vec![Step::text(
            openai_chunk("All ", None) + &openai_chunk("done.", Some("stop")),
        )]),
        // Closed in the middle of the answer: an error, not half an answer.
        Reply::Steps(vec![Step::text(openai_chunk("```python\nx = ", None))]),
    ])
    .await;
    let provider = HttpProvider::new(
        WireFormat::OpenAi,
        &llm.base_url,
        "fake-model",
        ApiKey::default(),
    )
    .unwrap();
    let (finished, _) = chat(&provider).await;
    assert_eq!(finished.unwrap().text, "All done.");
    let (cut, pieces) = chat(&provider).await;
    let error = cut.unwrap_err().to_string();
    assert!(
        error.contains("ended before the answer was complete"),
        "{error}"
    );
    assert_eq!(pieces, ["```python\nx = "]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_the_server_hangs_up_on_is_sent_again_at_once() {
    let llm = FakeLlm::start(vec![Reply::HangUp, Reply::Answer("second try".into())]).await;
    let (result, _) = chat(&provider(&llm, &key())).await;
    assert_eq!(result.unwrap().text, "second try");
    assert_eq!(llm.requests.lock().unwrap().len(), 2);

    // A server that keeps hanging up: a readable error that says why.
    let llm = FakeLlm::start(vec![Reply::HangUp; 8]).await;
    let (result, _) = chat(&provider(&llm, &key())).await;
    let error = result.unwrap_err().to_string();
    assert!(
        error.starts_with("cannot reach Anthropic: error sending request"),
        "{error}"
    );
    assert!(error.contains(": "), "the cause is named: {error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_format_rate_limited_then_a_stream_split_anywhere_with_usage() {
    let answer = "Ça marche: 6 × 7 = 42 ✓";
    let mut stream = String::new();
    for piece in ["Ça marche", ": 6 × 7", " = 42 ✓"] {
        stream.push_str(&openai_chunk(piece, None));
    }
    stream.push_str(&openai_chunk("", Some("stop")));
    let usage = json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40}});
    stream.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    // Three bytes a write: lines, JSON and characters are cut across chunks.
    let steps = stream
        .as_bytes()
        .chunks(3)
        .map(|bytes| Step::Write(bytes.to_vec()))
        .collect();
    let llm = FakeLlm::start(vec![
        Reply::StatusWith(
            429,
            vec![("retry-after", "0".into())],
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}).to_string(),
        ),
        Reply::Steps(steps),
    ])
    .await;
    let provider = HttpProvider::new(
        WireFormat::OpenAi,
        &llm.base_url,
        "gpt-test",
        ApiKey::new(Some("sk-test-openai".into())),
    )
    .unwrap();
    let (result, pieces) = chat(&provider).await;
    let outcome = result.unwrap();
    assert_eq!(outcome.text, answer);
    assert_eq!(pieces.concat(), answer);
    assert_eq!(
        outcome.usage,
        Usage {
            input_tokens: 31,
            output_tokens: 9,
            cost_usd: None,
            ..Default::default()
        }
    );
    let requests = llm.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "the rate-limited request was sent again");
    assert_eq!(requests[1]["model"], "gpt-test");
    assert_eq!(requests[1]["stream_options"]["include_usage"], true);
    let heads = llm.heads.lock().unwrap().clone();
    assert_eq!(heads[1].path, "/v1/chat/completions");
    assert_eq!(
        heads[1].header("authorization"),
        Some("Bearer sk-test-openai")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_a_readable_error_and_the_kernel_lives_on() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut kernel =
        Kernel::start_with_env(&[("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))]).await;
    kernel.execute("kept = 3").await;
    let (reply, _) = kernel.execute("%%ask\nhello").await;
    assert_eq!(reply.content["status"], "error");
    let evalue = reply.content["evalue"].as_str().unwrap();
    assert!(
        evalue.starts_with("cannot reach OpenAI-compatible server")
            && evalue.to_lowercase().contains("refused"),
        "{evalue}"
    );
    let (_, iopub) = kernel.execute("kept").await;
    assert_eq!(result_text(&iopub), "3");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_request_is_not_sent_again_with_the_next_one() {
    let llm = FakeLlm::start(vec![
        Reply::Status(
            400,
            json!({"error": {"message": "bad request", "type": "invalid_request_error"}})
                .to_string(),
        ),
        Reply::Answer("Second answer.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel
        .execute("%%ask --max-turns 1\nthe first request, which fails")
        .await;
    assert_eq!(reply.content["status"], "error");
    let (reply, _) = kernel
        .execute("%%ask --max-turns 1 --no-exec\nthe second request")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let requests = llm.requests.lock().unwrap();
    let second = serde_json::to_string(&requests[1]["messages"]).unwrap();
    assert!(second.contains("the second request"), "{second}");
    assert!(!second.contains("the first request"), "{second}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_context_window_is_asked_and_a_guess_is_said_once() {
    // A server that says nothing: the first cell says what is assumed.
    let silent = FakeLlm::start_with_window(
        vec![Reply::Answer("One.".into()), Reply::Answer("Two.".into())],
        None,
    )
    .await;
    let mut kernel = Kernel::start_with_env(&silent.env()).await;
    let (_, first) = kernel.execute("%%ask --no-exec\nsay one").await;
    let (_, second) = kernel.execute("%%ask --no-exec\nsay two").await;
    let notice = "does not say its context window: 8192 tokens assumed";
    assert!(
        stream_text(&first, "stdout").contains(notice),
        "{}",
        stream_text(&first, "stdout")
    );
    assert!(!stream_text(&second, "stdout").contains(notice));

    // A server whose window is small: older exchanges are left out to fit.
    let long = "x".repeat(4000);
    let small = FakeLlm::start_with_window(
        vec![Reply::Answer(long.clone()), Reply::Answer("Two.".into())],
        Some(1200),
    )
    .await;
    let mut kernel = Kernel::start_with_env(&small.env()).await;
    kernel.execute("%%ask --no-exec\nsay a lot").await;
    let (_, second) = kernel.execute("%%ask --no-exec\nsay two").await;
    assert!(!stream_text(&second, "stdout").contains("context window"));
    let sent = serde_json::to_string(&small.requests.lock().unwrap()[1]).unwrap();
    assert!(
        !sent.contains(&long),
        "the long answer was sent again in full"
    );
}
