//! The MCP tools: run code and `%%ask` requests in the kernel's live
//! namespace, follow a long cell, read the variables or one value, stop
//! what the server started. Code runs on the main shell while it is idle
//! and on a subshell of the server's own while a notebook cell runs there,
//! and questions about the namespace on another subshell, so both answer
//! while the notebook's own cells run.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::executions::{Execution, Executions, Waited};
use super::kernel::Channel;
use super::link::{Attached, Link};
use crate::text::floor_char_boundary;

/// How long `execute` waits for a cell by default before it answers that
/// the cell still runs (clients' own limits are often a minute or more).
const EXECUTE_WAIT: f64 = 50.0;
/// The same for an `ask` run, which calls a model several times.
const ASK_WAIT: f64 = 290.0;
/// The same for `read_output` on a running cell.
const READ_WAIT: f64 = 30.0;
/// The longest wait a call may ask for.
const LONGEST_WAIT: f64 = 600.0;
/// How often a waiting call tells the client the cell still runs.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// The least time between two progress notifications of output lines.
const PROGRESS_GAP: Duration = Duration::from_millis(250);
/// How long `interrupt` waits for the cell to stop.
const INTERRUPT_WAIT: Duration = Duration::from_secs(10);
/// How long a question about the namespace may take.
const QUERY_LIMIT: Duration = Duration::from_secs(30);
/// The most text one answer shows (bytes); longer output is shown as its
/// start and its end, and `read_output` reads the rest.
const SHOWN_CHARS: usize = 12_000;

const INSTRUCTIONS: &str = "These tools work in a live Jupyter kernel (mahtab, Python) that a \
person is using in a notebook: its variables are theirs. `variables` lists them and `inspect` \
describes one; `execute` runs code there (it answers after at most `wait` seconds; a longer cell \
keeps running and `read_output` follows it; `interrupt` stops it); `ask` hands a request to \
mahtab's own agent, under the notebook's guard and approval rules. Everything run here shows in \
the kernel's output to the notebook's clients.";

/// Where a cell of the server's runs.
#[derive(Debug, Clone, Copy)]
enum Shell {
    /// The main shell while no cell runs there (an interrupt ends a call
    /// blocked in C only there), else the work subshell.
    MainWhenIdle,
    /// The work subshell.
    Work,
}

/// The server: one per kernel connection.
#[derive(Clone)]
pub struct KernelTools {
    /// The kernel and the server's subshells there (new ones after a restart).
    link: Arc<Link>,
    executions: Arc<Executions>,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ExecuteArgs {
    /// Python code (IPython syntax: magics and `!` shell lines work) to run in
    /// the kernel's namespace.
    code: String,
    /// Seconds to wait for the cell to end before answering with what it has
    /// shown so far (default 50, at most 600). The cell goes on running.
    wait: Option<f64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AskArgs {
    /// What to ask mahtab's agent, in words.
    request: String,
    /// Options of the `%%ask` line, e.g. `--graph planner` or `--turns 3`.
    options: Option<String>,
    /// Seconds to wait for the run to end (default 290, at most 600).
    wait: Option<f64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ReadOutputArgs {
    /// The execution's number, from `execute` or `ask`.
    execution: u64,
    /// Where in its text to start reading (a byte offset, as the last
    /// answer gives it); without it, the start and the end are shown.
    offset: Option<usize>,
    /// Seconds to wait for a running cell to end first (default 30).
    wait: Option<f64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct InspectArgs {
    /// A variable's name or an expression (`df.dtypes`, `data['key']`).
    expression: String,
}

#[tool_router]
impl KernelTools {
    pub fn new(link: Arc<Link>) -> Self {
        Self {
            link,
            executions: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// Runs Python code in the notebook's live namespace and returns its
    /// output (text, and figures as images).
    #[tool]
    async fn execute(
        &self,
        Parameters(args): Parameters<ExecuteArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let wait = args.wait.unwrap_or(EXECUTE_WAIT);
        self.run_cell(args.code, Shell::MainWhenIdle, wait, &context)
            .await
    }

    /// Asks mahtab's agent (a `%%ask` cell): it writes and runs code in the
    /// namespace and reviews the result. Returns its answer, the code it
    /// ran with the output, and what it changed.
    #[tool]
    async fn ask(
        &self,
        Parameters(args): Parameters<AskArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let options = args.options.unwrap_or_default();
        let code = format!("%%ask {}\n{}", options.trim(), args.request);
        // An agent run waits on the model for minutes: on the subshell, the
        // notebook's cells run meanwhile.
        let wait = args.wait.unwrap_or(ASK_WAIT);
        self.run_cell(code, Shell::Work, wait, &context).await
    }

    /// Reads the output of an earlier `execute` or `ask`: waits for it to
    /// end if it still runs, or reads the part of a long output not shown.
    #[tool]
    async fn read_output(
        &self,
        Parameters(args): Parameters<ReadOutputArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let Some(execution) = self.executions.get(args.execution) else {
            return Ok(failure(format!(
                "there is no execution {} (the latest {} are kept)",
                args.execution,
                super::executions::KEPT
            )));
        };
        let ended = follow(
            &execution,
            seconds(args.wait.unwrap_or(READ_WAIT)),
            &context,
        )
        .await;
        Ok(report(&execution, ended, args.offset))
    }

    /// Lists the notebook's variables: name, type, shape or length,
    /// DataFrame columns with dtypes, a short value.
    #[tool]
    async fn variables(&self) -> Result<CallToolResult, McpError> {
        self.query(
            "__import__('mahtab.agent.mcp_queries').agent.mcp_queries.variables(globals())".into(),
        )
        .await
    }

    /// Describes one value in detail: type, size, a table's columns with
    /// dtypes and missing values and its first rows, an array's range.
    #[tool]
    async fn inspect(
        &self,
        Parameters(args): Parameters<InspectArgs>,
    ) -> Result<CallToolResult, McpError> {
        // A JSON string is a Python string literal.
        let expression = Value::String(args.expression).to_string();
        self.query(format!(
            "__import__('mahtab.agent.mcp_queries').agent.mcp_queries.inspect(globals(), {expression})"
        ))
        .await
    }

    /// Stops the cell this server is running (an `execute` or `ask`), as
    /// the notebook's interrupt button does.
    #[tool]
    async fn interrupt(&self) -> Result<CallToolResult, McpError> {
        let Some(execution) = self.executions.running() else {
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                "nothing started here is running",
            )]));
        };
        // The protocol's interrupt reaches every running cell of the kernel;
        // it is sent only while one of ours runs.
        self.attached()
            .await?
            .kernel
            .control("interrupt_request", json!({}))
            .await
            .map_err(kernel_error)?;
        let mut changes = execution.changes();
        let deadline = tokio::time::Instant::now() + INTERRUPT_WAIT;
        let ended = loop {
            match execution.wait_step(&mut changes, deadline, HEARTBEAT).await {
                Waited::Ended => break true,
                Waited::TimedOut => break false,
                Waited::Output | Waited::Quiet => {}
            }
        };
        Ok(report(&execution, ended, None))
    }
}

impl KernelTools {
    /// The kernel (waiting for it while it restarts).
    async fn attached(&self) -> Result<Arc<Attached>, McpError> {
        self.link.attached().await.map_err(kernel_error)
    }

    /// Runs `code` as a cell on `shell` and follows it for `wait` seconds.
    async fn run_cell(
        &self,
        code: String,
        shell: Shell,
        wait: f64,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // The server sends one cell at a time, so a failure has nothing of
        // its own to abort; on the main shell it must not abort the
        // notebook's cells queued behind it.
        let content = json!({
            "code": code,
            "silent": false,
            "store_history": true,
            "user_expressions": {},
            "allow_stdin": false,
            "stop_on_error": false,
        });
        let attached = self.attached().await?;
        let send = || {
            attached.kernel.send(
                Channel::Shell,
                "execute_request",
                content,
                match shell {
                    Shell::MainWhenIdle => attached.cell_shell(),
                    Shell::Work => Some(attached.work()),
                },
            )
        };
        let execution = match self.executions.start(send) {
            Ok(started) => started.map_err(kernel_error)?,
            Err(id) => {
                return Ok(failure(format!(
                    "execution {id} is still running: read_output with execution={id} follows it, \
                     interrupt stops it"
                )));
            }
        };
        let ended = follow(&execution, seconds(wait), context).await;
        Ok(report(&execution, ended, None))
    }

    /// Evaluates `expression` (which returns text) on the look subshell.
    async fn query(&self, expression: String) -> Result<CallToolResult, McpError> {
        let content = json!({
            "code": "",
            "silent": true,
            "store_history": false,
            "user_expressions": { "answer": expression },
            "allow_stdin": false,
        });
        let attached = self.attached().await?;
        let look = attached.look();
        let mut pending = attached
            .kernel
            .send(Channel::Shell, "execute_request", content, Some(&look))
            .map_err(kernel_error)?;
        let reply = match tokio::time::timeout(QUERY_LIMIT, pending.reply()).await {
            Ok(reply) => reply.map_err(kernel_error)?,
            Err(_) => {
                // That subshell is stuck in the value's code; later questions
                // go to a fresh one.
                let fresh = attached
                    .kernel
                    .create_subshell()
                    .await
                    .map_err(kernel_error)?;
                attached.replace_look(fresh);
                return Ok(failure(format!(
                    "no answer within {} s (the value's own code may hang); later questions go to \
                     a fresh subshell",
                    QUERY_LIMIT.as_secs()
                )));
            }
        };
        let answer = &reply.content["user_expressions"]["answer"];
        Ok(match answer["data"]["text/plain"].as_str() {
            Some(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            None => failure(format!(
                "{}: {}",
                answer["ename"].as_str().unwrap_or("error"),
                answer["evalue"]
                    .as_str()
                    .unwrap_or("the kernel gave no answer")
            )),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KernelTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mahtab", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// Waits for `execution` to end, at most `limit`, telling the client how
/// it goes when it asked for progress; whether it ended. A client that
/// cancels its call stops the wait, not the cell.
async fn follow(
    execution: &Execution,
    limit: Duration,
    context: &RequestContext<RoleServer>,
) -> bool {
    let token = context.meta.get_progress_token();
    let deadline = tokio::time::Instant::now() + limit;
    let mut changes = execution.changes();
    let mut told = 0.0;
    let mut last_told: Option<std::time::Instant> = None;
    loop {
        let waited = tokio::select! {
            waited = execution.wait_step(&mut changes, deadline, HEARTBEAT) => waited,
            () = context.ct.cancelled() => return execution.done(),
        };
        match waited {
            Waited::Ended => return true,
            Waited::TimedOut => return false,
            Waited::Output | Waited::Quiet => {}
        }
        let Some(token) = &token else { continue };
        // A line of output, at most one every PROGRESS_GAP; or a heartbeat.
        let message = match waited {
            Waited::Output if last_told.is_some_and(|told| told.elapsed() < PROGRESS_GAP) => {
                continue;
            }
            Waited::Output => match execution.take_latest_line() {
                Some(line) => line,
                None => continue,
            },
            _ => format!("running for {} s", execution.started.elapsed().as_secs()),
        };
        last_told = Some(std::time::Instant::now());
        told += 1.0;
        let progress = ProgressNotificationParam::new(token.clone(), told).with_message(message);
        if let Err(e) = context.peer.notify_progress(progress).await {
            tracing::debug!("progress not sent: {e}");
        }
    }
}

/// What a call tells of an execution: how it stands, its text (bounded),
/// its figures.
fn report(execution: &Execution, ended: bool, offset: Option<usize>) -> CallToolResult {
    let outputs = execution.outputs();
    let id = execution.id;
    let cell = outputs
        .execution_count
        .map(|count| format!(" (In [{count}])"))
        .unwrap_or_default();
    let elapsed = execution.started.elapsed().as_secs_f64();
    let state = match (&outputs.error, ended && outputs.done) {
        (Some(error), true) => format!("failed after {elapsed:.1} s: {error}"),
        (None, true) => format!("done in {elapsed:.1} s"),
        (_, false) => format!(
            "still running after {elapsed:.0} s: read_output with execution={id} follows it, \
             interrupt stops it"
        ),
    };
    let text = outputs.text();
    let mut shown = format!("execution {id}{cell}: {state}\n");
    shown.push_str(&bounded(&text, offset, id));
    if outputs.dropped_chars > 0 {
        shown.push_str(&format!(
            "\n[{} more bytes of output were not kept]",
            outputs.dropped_chars
        ));
    }
    let mut content = vec![ContentBlock::text(shown)];
    if offset.is_none() {
        for image in outputs.images() {
            content.push(ContentBlock::image(image.base64, "image/png"));
        }
    }
    if ended && outputs.error.is_some() {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// At most [`SHOWN_CHARS`] of `text`: from `offset` on when one is given,
/// else its start and its end, saying how to read what is left out.
fn bounded(text: &str, offset: Option<usize>, id: u64) -> String {
    if let Some(offset) = offset {
        let start = floor_char_boundary(text, offset);
        let end = floor_char_boundary(text, start + SHOWN_CHARS);
        let mut out = text[start..end].to_owned();
        if end < text.len() {
            out.push_str(&format!(
                "\n[{} more bytes: read_output with execution={id}, offset={end}]",
                text.len() - end
            ));
        }
        return out;
    }
    if text.len() <= SHOWN_CHARS {
        return text.to_owned();
    }
    let head_end = floor_char_boundary(text, SHOWN_CHARS / 2);
    let tail_start = floor_char_boundary(text, text.len() - SHOWN_CHARS / 2);
    format!(
        "{}\n[... {} bytes left out: read_output with execution={id}, offset={head_end} \
         reads them ...]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn seconds(wait: f64) -> Duration {
    Duration::from_secs_f64(if wait.is_finite() {
        wait.clamp(0.0, LONGEST_WAIT)
    } else {
        EXECUTE_WAIT
    })
}

/// A tool call that did not do what was asked, said in words.
fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn kernel_error(error: anyhow::Error) -> McpError {
    McpError::internal_error(format!("{error:#}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_shows_its_start_and_end_and_says_where_the_rest_is() {
        let text = format!(
            "{}{}{}",
            "a".repeat(SHOWN_CHARS),
            "b".repeat(100),
            "c".repeat(SHOWN_CHARS)
        );
        let shown = bounded(&text, None, 7);
        assert!(shown.starts_with(&"a".repeat(SHOWN_CHARS / 2)));
        assert!(shown.ends_with(&"c".repeat(SHOWN_CHARS / 2)));
        assert!(shown.contains(&format!(
            "read_output with execution=7, offset={}",
            SHOWN_CHARS / 2
        )));
        assert!(shown.len() < SHOWN_CHARS + 200);
    }

    #[test]
    fn reading_from_an_offset_goes_on_where_the_last_read_stopped() {
        let text = "é".repeat(SHOWN_CHARS);
        let first = bounded(&text, Some(1), 1);
        // The offset fell inside a character: reading starts at its start.
        assert!(first.starts_with('é'));
        let next = first
            .rsplit("offset=")
            .next()
            .unwrap()
            .trim_end_matches(']');
        let rest = bounded(&text, Some(next.parse().unwrap()), 1);
        assert!(!rest.contains("more bytes"));
        assert_eq!(
            first.chars().filter(|&c| c == 'é').count() + rest.chars().count(),
            text.chars().count()
        );
    }

    #[test]
    fn a_wait_is_bounded_whatever_the_client_asks() {
        assert_eq!(seconds(-5.0), Duration::ZERO);
        assert_eq!(seconds(1e9), Duration::from_secs_f64(LONGEST_WAIT));
        assert_eq!(seconds(f64::NAN), Duration::from_secs_f64(EXECUTE_WAIT));
    }
}
