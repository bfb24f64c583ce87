//! The context window an OpenAI-compatible server serves, asked of the
//! server: llama.cpp says it in `GET /props`, vLLM in `GET /v1/models`
//! (`max_model_len`), Ollama in `POST /api/show` (its `num_ctx`). A server
//! that says nothing gets a guess, which the run reports as one.

use std::time::Duration;

use serde_json::{Value, json};

/// How long each question to the server may take.
const ASK_LIMIT: Duration = Duration::from_secs(2);

/// The window served at `base_url` (`http://host:port/v1`) for `model`, if
/// the server says.
pub async fn served_window(base_url: &str, model: &str) -> Option<usize> {
    let client = super::http::shared_client().ok()?;
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    if let Some(window) = get(&client, format!("{root}/props"))
        .await
        .as_ref()
        .and_then(llama_cpp)
    {
        return Some(window);
    }
    if let Some(window) = get(&client, format!("{base}/models"))
        .await
        .as_ref()
        .and_then(|models| listed(models, model))
    {
        return Some(window);
    }
    let shown = client
        .post(format!("{root}/api/show"))
        .header("content-type", "application/json")
        .body(json!({ "model": model }).to_string())
        .timeout(ASK_LIMIT)
        .send()
        .await
        .ok()?;
    if !shown.status().is_success() {
        return None;
    }
    ollama(&serde_json::from_slice(&shown.bytes().await.ok()?).ok()?)
}

/// The JSON a `GET url` answers with, if it answers with JSON.
async fn get(client: &reqwest::Client, url: String) -> Option<Value> {
    let response = client.get(url).timeout(ASK_LIMIT).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    serde_json::from_slice(&response.bytes().await.ok()?).ok()
}

fn positive(value: &Value) -> Option<usize> {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// llama.cpp's `/props`: `default_generation_settings.n_ctx` (also at the
/// top level in some versions).
fn llama_cpp(props: &Value) -> Option<usize> {
    positive(&props["default_generation_settings"]["n_ctx"]).or_else(|| positive(&props["n_ctx"]))
}

/// `/v1/models`: vLLM's `max_model_len` for this model (or the only one).
fn listed(models: &Value, model: &str) -> Option<usize> {
    let data = models["data"].as_array()?;
    let entry = data
        .iter()
        .find(|entry| entry["id"] == model)
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    positive(&entry["max_model_len"])
}

/// Ollama's `/api/show`: the `num_ctx` its parameters set.
fn ollama(shown: &Value) -> Option<usize> {
    let parameters = shown["parameters"].as_str()?;
    parameters.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("num_ctx")).then(|| words.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_answer_is_read() {
        let props = json!({"default_generation_settings": {"n_ctx": 16384, "n_predict": -1}});
        assert_eq!(llama_cpp(&props), Some(16384));
        assert_eq!(llama_cpp(&json!({"n_ctx": 4096})), Some(4096));
        let models = json!({"object": "list", "data": [
            {"id": "a", "max_model_len": 8192},
            {"id": "qwen", "max_model_len": 32768},
        ]});
        assert_eq!(listed(&models, "qwen"), Some(32768));
        assert_eq!(listed(&models, "other"), None);
        let one = json!({"data": [{"id": "x", "meta": {"n_ctx_train": 32768}}]});
        assert_eq!(
            listed(&one, "y"),
            None,
            "a trained window is not the served one"
        );
        let shown = json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192"});
        assert_eq!(ollama(&shown), Some(8192));
        assert_eq!(ollama(&json!({"parameters": "temperature 0"})), None);
    }
}
