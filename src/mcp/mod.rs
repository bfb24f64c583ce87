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
    let look = match kernel.create_subshell().await {
        Ok(look) => look,
        Err(e) => {
            delete_subshells(&kernel, [work]).await;
            return Err(e);
        }
    };
    let tools = server::KernelTools::new(kernel.clone(), work.clone(), look.clone());
    let service = tools
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP client did not initialise")?;
    let cancel = service.cancellation_token();
    let ended = tokio::select! {
        ended = service.waiting() => ended,
        () = kernel.gone() => {
            // A restarted kernel has new subshells and a new namespace: the
            // client starts the server again.
            cancel.cancel();
            anyhow::bail!("the kernel has gone away (restarted or shut down)");
        }
    };
    delete_subshells(&kernel, [work, look]).await;
    ended.context("the MCP session failed")?;
    Ok(())
}

async fn delete_subshells<const N: usize>(kernel: &kernel::KernelClient, ids: [String; N]) {
    for id in ids {
        let request = json!({ "subshell_id": id });
        if let Err(e) = kernel.control("delete_subshell_request", request).await {
            tracing::debug!("subshell {id} not deleted: {e:#}");
        }
    }
}
