//! `mahtab mcp`: a Model Context Protocol server over stdio for one running
//! mahtab kernel, so coding agents (Claude Code, VS Code, ...) work in the
//! notebook's live namespace. It is a client of the kernel like any other
//! (its connection file, its channels), with two subshells of its own: one
//! runs its cells, one answers questions about the namespace, so both work
//! while the notebook's cells run and the notebook sees what it ran. A
//! kernel restarted on the same connection file is connected to again.

mod executions;
mod images;
mod kernel;
mod link;
mod outputs;
mod server;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::ServiceExt;

use link::{Attached, Link};

/// How long answers to calls in flight have to be written once the kernel
/// is gone for good.
const ANSWERS_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Serves MCP on stdin and stdout until the client goes away, or the kernel
/// does (shut down, or not back from a restart within its time).
pub async fn serve(connection_file: &Path) -> Result<()> {
    let link = Arc::new(Link::new(Attached::open(connection_file).await?));
    let tools = server::KernelTools::new(link.clone());
    let service = tools
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP client did not initialise")?;
    let cancel = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    loop {
        let Some(current) = link.current() else {
            anyhow::bail!("no kernel to serve");
        };
        tokio::select! {
            ended = &mut waiting => {
                current.close().await;
                ended.context("the MCP session failed")?;
                return Ok(());
            }
            () = current.kernel.gone() => {}
        }
        // Restarted (the same connection file, a new namespace) or shut
        // down: tool calls wait while the kernel is looked for again.
        link.detach();
        tracing::info!("the kernel went away; connecting again if it restarts");
        tokio::select! {
            ended = &mut waiting => {
                ended.context("the MCP session failed")?;
                return Ok(());
            }
            attached = link::reattach(connection_file) => match attached {
                Ok(attached) => link.attach(attached),
                Err(e) => {
                    // Calls waiting for the kernel fail now; their answers
                    // get a moment to be written before the session ends.
                    link.close();
                    tokio::time::sleep(ANSWERS_GRACE).await;
                    cancel.cancel();
                    return Err(e.context("the kernel has gone away"));
                }
            },
        }
    }
}
