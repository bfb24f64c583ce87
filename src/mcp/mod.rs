//! `mahtab mcp`: a Model Context Protocol server over stdio for one running
//! mahtab kernel, so coding agents (Claude Code, VS Code, ...) work in the
//! notebook's live namespace. It is a client of the kernel like any other
//! (its connection file, its channels), with two subshells of its own: one
//! runs its cells, one answers questions about the namespace, so both work
//! while the notebook's cells run and the notebook sees what it ran.

mod executions;
mod images;
mod kernel;
mod outputs;
mod server;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::ServiceExt;
use serde_json::json;

/// Serves MCP on stdin and stdout until the client goes away.
pub async fn serve(connection_file: &Path) -> Result<()> {
    let kernel = Arc::new(kernel::KernelClient::connect(connection_file).await?);
    let work = kernel
        .create_subshell()
        .await
        .context("the kernel must offer subshells (mahtab does)")?;
    let look = kernel.create_subshell().await?;
    let tools = server::KernelTools::new(kernel.clone(), work.clone(), look.clone());
    let service = tools
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP client did not initialise")?;
    let ended = service.waiting().await;
    for id in [work, look] {
        let request = json!({ "subshell_id": id });
        if let Err(e) = kernel.control("delete_subshell_request", request).await {
            tracing::debug!("subshell {id} not deleted: {e:#}");
        }
    }
    ended.context("the MCP session failed")?;
    Ok(())
}
