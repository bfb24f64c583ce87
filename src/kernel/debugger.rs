//! The Jupyter debug protocol: a `debug_request` on the control channel
//! carries a Debug Adapter Protocol request, its `debug_reply` the DAP
//! response, and the adapter's events go out as `debug_event` on IOPub.
//!
//! The kernel is a DAP client ([`super::dap`]) of debugpy's adapter, which
//! debugpy starts when the kernel's Python calls `debugpy.listen` (on the
//! first `initialize`, on the interpreter thread, as ipykernel does). Most
//! requests pass through; the kernel answers itself the Jupyter extensions
//! (`debugInfo`, `dumpCell`), keeps the breakpoints and stopped threads
//! that `debugInfo` reports, completes debugpy's `attach` handshake, and
//! answers `configurationDone` from the frontend (debugpy has had the
//! kernel's own by then). Control requests keep being served while a cell
//! is stopped at a breakpoint: the control task never waits for Python
//! then.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::dap::{DapClient, Response};
use super::iopub::Iopub;
use crate::cell_files;
use crate::python::{Parent, PythonHandle, RuntimeMethod, RuntimeRequest};

/// How long the variables panel's values may take to make, all together;
/// after that the rest are listed without a value.
const REPR_SECONDS: f64 = 2.0;

/// How long a debugger request may wait on Python before the call is sent
/// a TimeoutError (the control channel never waits on it: see `control`).
const PYTHON_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The debugger of one kernel.
pub(super) struct Debugger {
    session: tokio::sync::Mutex<Session>,
    /// Threads stopped now (the adapter's events keep it current).
    stopped: Arc<Mutex<BTreeSet<i64>>>,
    /// How many `initialized` events the adapter has sent.
    initialized: Arc<watch::Sender<u64>>,
}

impl Default for Debugger {
    fn default() -> Self {
        Self {
            session: tokio::sync::Mutex::default(),
            stopped: Arc::default(),
            initialized: Arc::new(watch::channel(0).0),
        }
    }
}

#[derive(Default)]
struct Session {
    /// debugpy's adapter port, once `debugpy.listen` ran (once a process).
    port: Option<u16>,
    client: Option<Arc<DapClient>>,
    /// Whether `attach` completed (debugInfo's `isStarted`).
    attached: bool,
    /// The breakpoints set, by source path, as the adapter confirmed them.
    breakpoints: BTreeMap<String, Vec<Value>>,
    /// Source files of the kernel's own Python.
    kernel_files: Vec<String>,
}

/// Where the debugger's events go: IOPub, as children of the control
/// request served last.
pub(super) struct EventSink {
    pub iopub: Iopub,
    pub parent: Box<dyn Fn() -> Arc<Value> + Send + Sync>,
}

impl Debugger {
    /// Answers one debug_request's content (a DAP request).
    pub(super) async fn handle(
        &self,
        request: &Value,
        python: &PythonHandle,
        events: &Arc<EventSink>,
    ) -> Value {
        let command = request["command"].as_str().unwrap_or_default();
        let arguments = request.get("arguments").cloned().unwrap_or(json!({}));
        tracing::debug!("debugger: {command} {arguments}");
        let mut session = self.session.lock().await;
        let result = match command {
            "debugInfo" => Ok(self.debug_info(request, &session)),
            "dumpCell" => Ok(dump_cell(request, &arguments)),
            "inspectVariables" => python
                .call_now(
                    RuntimeMethod::DebugVariables,
                    json!({ "seconds": REPR_SECONDS }),
                    // Just past the Python side's own deadline: only a repr
                    // that is still running then gets the TimeoutError.
                    std::time::Duration::from_secs_f64(REPR_SECONDS + 0.2),
                )
                .await
                .map(|body| response(command, body))
                .map_err(|e| e.evalue),
            "richInspectVariables" => self.rich_inspect(&session, python, &arguments).await,
            "copyToGlobals" => copy_to_globals(&session, &arguments).await,
            "modules" => {
                // Some frontends put the paging fields beside the arguments.
                let paging =
                    |field: &str| arguments.get(field).or_else(|| request.get(field)).cloned();
                let args = json!({ "startModule": paging("startModule"), "moduleCount": paging("moduleCount") });
                python
                    .call_now(RuntimeMethod::DebugModules, args, PYTHON_CALL_LIMIT)
                    .await
                    .map(|body| response(command, body))
                    .map_err(|e| e.evalue)
            }
            "source" => Ok(source(&arguments)),
            "initialize" => match self.start(&mut session, python, events).await {
                Ok(client) => client
                    .request("initialize", arguments)
                    .await
                    .map_err(|e| e.to_string()),
                Err(message) => Err(message),
            },
            "attach" => match session.client.clone() {
                Some(client) => {
                    let mut arguments = arguments;
                    if arguments.is_object() && arguments.get("rules").is_none() {
                        // The kernel's own Python is stepped over and left
                        // out of call stacks.
                        let rules: Vec<Value> = session
                            .kernel_files
                            .iter()
                            .map(|path| json!({ "path": path, "include": false }))
                            .collect();
                        arguments["rules"] = json!(rules);
                    }
                    let reply = attach(&client, arguments, self.initialized.subscribe()).await;
                    session.attached = reply.as_ref().is_ok_and(|reply| reply["success"] == true);
                    reply
                }
                None => Err("the debugger is not initialized".into()),
            },
            // debugpy had the kernel's own when it attached.
            "configurationDone" => Ok(Response::success(command, None).into_json()),
            _ => match session.client.clone() {
                None => return json!({}),
                Some(client) => {
                    let reply = client
                        .request(command, arguments.clone())
                        .await
                        .map_err(|e| e.to_string());
                    match command {
                        "setBreakpoints" => {
                            if let Ok(reply) = &reply {
                                record_breakpoints(&mut session, &arguments, reply);
                            }
                        }
                        // The adapter sends no `continued` event for what the
                        // client resumed itself.
                        "continue" | "next" | "stepIn" | "stepOut" | "stepBack"
                        | "reverseContinue" | "goto" => {
                            if let Ok(reply) = &reply
                                && reply["success"] == true
                            {
                                let all = command == "continue"
                                    && reply["body"]["allThreadsContinued"] != false;
                                let mut stopped = self.stopped_threads();
                                if all {
                                    stopped.clear();
                                } else if let Some(thread) = arguments["threadId"].as_i64() {
                                    stopped.remove(&thread);
                                }
                            }
                        }
                        "disconnect" => {
                            session.client = None;
                            session.attached = false;
                            session.breakpoints.clear();
                            self.stopped_threads().clear();
                        }
                        _ => {}
                    }
                    reply
                }
            },
        };
        let mut reply = result.unwrap_or_else(|message| {
            tracing::warn!("debugger: {command} failed: {message}");
            Response::failure(command, message).into_json()
        });
        // The response answers the frontend's request, whatever number the
        // kernel's own connection gave it.
        reply["request_seq"] = request["seq"].clone();
        reply["seq"] = request["seq"].clone();
        reply
    }

    fn stopped_threads(&self) -> std::sync::MutexGuard<'_, BTreeSet<i64>> {
        self.stopped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts debugpy (once) and connects to its adapter (again after a
    /// disconnect).
    async fn start(
        &self,
        session: &mut Session,
        python: &PythonHandle,
        events: &Arc<EventSink>,
    ) -> Result<Arc<DapClient>, String> {
        if let Some(client) = &session.client {
            return Ok(client.clone());
        }
        let port = match session.port {
            Some(port) => port,
            None => {
                let parent = Parent {
                    header: (events.parent)(),
                    ..Parent::none()
                };
                let started = python
                    .request_aside(RuntimeRequest::DebugpyListen, json!({}), parent)
                    .await
                    .map_err(|e| format!("debugpy did not start: {}: {}", e.ename, e.evalue))?;
                let port = started["port"]
                    .as_u64()
                    .and_then(|port| u16::try_from(port).ok())
                    .ok_or("debugpy did not say its port")?;
                session.port = Some(port);
                session.kernel_files = started["internal"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|path| path.as_str().map(str::to_owned))
                    .collect();
                port
            }
        };
        let stopped = self.stopped.clone();
        let initialized = self.initialized.clone();
        let events = events.clone();
        let client = DapClient::connect(port, move |event| {
            note_threads(&stopped, &event);
            if event["event"] == "initialized" {
                initialized.send_modify(|count| *count += 1);
            }
            events
                .iopub
                .publish("debug_event", event, (events.parent)());
        })
        .await
        .map_err(|e| e.to_string())?;
        let client = Arc::new(client);
        session.client = Some(client.clone());
        Ok(client)
    }

    /// `richInspectVariables`: a variable's rich view (its MIME bundle), in
    /// the frame the debugger stopped in, or in the user's namespace.
    async fn rich_inspect(
        &self,
        session: &Session,
        python: &PythonHandle,
        arguments: &Value,
    ) -> Result<Value, String> {
        let name = arguments["variableName"].as_str().unwrap_or_default();
        if !is_identifier(name) {
            let grouping = matches!(name, "special variables" | "function variables");
            let mut reply = response(
                "richInspectVariables",
                json!({ "data": {}, "metadata": {} }),
            );
            reply["success"] = json!(grouping);
            return Ok(reply);
        }
        let frame = arguments.get("frameId").filter(|frame| !frame.is_null());
        let stopped = !self.stopped_threads().is_empty();
        let args = match (&session.client, frame) {
            (Some(client), Some(frame)) if stopped => {
                // The frame's value, kept in full on the Python side: the
                // debugger's own text of a value is shortened.
                let expression = format!(
                    "__import__('mahtab.runtime.debugger').runtime.debugger.keep_for_debugger(\
                     __import__('mahtab.runtime.display').runtime.display.mime_bundle({name}))"
                );
                let evaluated = client
                    .request(
                        "evaluate",
                        json!({ "expression": expression, "frameId": frame, "context": "clipboard" }),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                let key = evaluated["body"]["result"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_matches(['\'', '"']);
                json!({ "key": key })
            }
            _ => json!({ "name": name }),
        };
        python
            .call_now(RuntimeMethod::DebugRichInspect, args, PYTHON_CALL_LIMIT)
            .await
            .map(|body| response("richInspectVariables", body))
            .map_err(|e| e.evalue)
    }

    fn debug_info(&self, request: &Value, session: &Session) -> Value {
        let breakpoints: Vec<Value> = session
            .breakpoints
            .iter()
            .map(|(source, breakpoints)| json!({ "source": source, "breakpoints": breakpoints }))
            .collect();
        let body = json!({
                "isStarted": session.attached,
                "hashMethod": "Murmur2",
                "hashSeed": cell_files::HASH_SEED,
                "tmpFilePrefix": cell_files::prefix(),
                "tmpFileSuffix": cell_files::SUFFIX,
                "breakpoints": breakpoints,
                "stoppedThreads": *self.stopped_threads(),
                "richRendering": true,
                "exceptionPaths": ["Python Exceptions"],
                "copyToGlobals": true,
        });
        Response::success("debugInfo", Some(body))
            .answering(request)
            .into_json()
    }
}

/// debugpy's attach: the adapter answers `attach` only after the client's
/// `configurationDone`, which it wants after its `initialized` event.
async fn attach(
    client: &DapClient,
    mut arguments: Value,
    mut initialized: watch::Receiver<u64>,
) -> Result<Value, String> {
    initialized.mark_unchanged();
    if !arguments.is_object() {
        arguments = json!({});
    }
    // debugpy only checks that the connection is named; stepping into the
    // standard library is allowed, as in ipykernel.
    arguments["connect"] = json!({ "host": "127.0.0.1" });
    arguments["logToFile"] = json!(false);
    if arguments.get("debugOptions").is_none() {
        arguments["debugOptions"] = json!(["DebugStdLib"]);
    }
    let (seq, response) = client
        .send("attach", arguments)
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(std::time::Duration::from_secs(30), initialized.changed())
        .await
        .map_err(|_| "the debug adapter did not initialize in time".to_owned())?
        .map_err(|e| e.to_string())?;
    client
        .request("configurationDone", json!({}))
        .await
        .map_err(|e| e.to_string())?;
    client
        .response(seq, "attach", response)
        .await
        .map_err(|e| e.to_string())
}

/// Keeps the stopped threads current from the adapter's events.
fn note_threads(stopped: &Mutex<BTreeSet<i64>>, event: &Value) {
    let mut stopped = stopped.lock().unwrap_or_else(PoisonError::into_inner);
    let thread = event["body"]["threadId"].as_i64();
    match event["event"].as_str() {
        Some("stopped") => stopped.extend(thread),
        Some("continued") if event["body"]["allThreadsContinued"] == true => stopped.clear(),
        Some("continued") => {
            if let Some(thread) = thread {
                stopped.remove(&thread);
            }
        }
        Some("exited" | "terminated") => stopped.clear(),
        _ => {}
    }
}

/// Keeps the breakpoints of `setBreakpoints` as the adapter placed them.
fn record_breakpoints(session: &mut Session, arguments: &Value, reply: &Value) {
    let Some(source) = arguments["source"]["path"].as_str() else {
        return;
    };
    if reply["success"] != true {
        return;
    }
    let lines: Vec<Value> = reply["body"]["breakpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|breakpoint| breakpoint.get("line"))
        .map(|line| json!({ "line": line }))
        .collect();
    if lines.is_empty() {
        session.breakpoints.remove(source);
    } else {
        session.breakpoints.insert(source.to_owned(), lines);
    }
}

/// `dumpCell`: writes the cell's code to the file it compiles under, so the
/// debugger can show it and breakpoints can name it.
fn dump_cell(request: &Value, arguments: &Value) -> Value {
    let code = arguments["code"].as_str().unwrap_or_default();
    let path = cell_files::file_name(code);
    match cell_files::write(code) {
        Ok(_) => Response::success("dumpCell", Some(json!({ "sourcePath": path }))),
        Err(e) => Response::failure("dumpCell", format!("cannot write {path}: {e}")),
    }
    .answering(request)
    .into_json()
}

/// A successful response to `command` with `body`.
fn response(command: &str, body: Value) -> Value {
    Response::success(command, Some(body)).into_json()
}

/// Whether `name` is a plain Python name (what is safe to put in an
/// expression).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// `copyToGlobals`: a variable of a stopped frame becomes a global of the
/// user's namespace.
async fn copy_to_globals(session: &Session, arguments: &Value) -> Result<Value, String> {
    let source = arguments["srcVariableName"].as_str().unwrap_or_default();
    let destination = arguments["dstVariableName"].as_str().unwrap_or_default();
    if !is_identifier(source) || !is_identifier(destination) {
        return Err(format!(
            "copyToGlobals needs variable names, not {source:?} and {destination:?}"
        ));
    }
    let client = session
        .client
        .as_ref()
        .ok_or("the debugger is not started")?;
    let mut reply = client
        .request(
            "setExpression",
            json!({
                "expression": format!("globals()['{destination}']"),
                "value": source,
                "frameId": arguments["srcFrameId"],
            }),
        )
        .await
        .map_err(|e| e.to_string())?;
    reply["command"] = json!("copyToGlobals");
    Ok(reply)
}

/// `source`: a file's text, for frames whose source the frontend lacks.
fn source(arguments: &Value) -> Value {
    let path = arguments["source"]["path"].as_str().unwrap_or_default();
    match std::fs::read_to_string(path) {
        Ok(content) => response("source", json!({ "content": content })),
        Err(_) => Response::failure("source", "source unavailable")
            .with_body(json!({}))
            .into_json(),
    }
}
