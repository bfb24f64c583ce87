//! What an OpenAI-compatible server says of the model it serves: its
//! context window and whether it takes images. llama.cpp says both in
//! `GET /props` (`n_ctx`, `modalities.vision`), vLLM the window in
//! `GET /v1/models` (`max_model_len`), Ollama both in `POST /api/show`
//! (`num_ctx`, `capabilities`). What a server does not say stays unknown:
//! the window is then a guess the run reports as one, and images are not
//! sent.

use std::time::Duration;

use serde_json::{Value, json};

/// How long each question to the server may take.
const ASK_LIMIT: Duration = Duration::from_secs(2);

/// What a server said of a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    pub window: Option<usize>,
    pub vision: Option<bool>,
}

/// The window served at `base_url` (`http://host:port/v1`) for `model`, and
/// whether the model takes images, as far as the server says.
pub async fn ask_server(base_url: &str, model: &str) -> Served {
    let Ok(client) = super::http::shared_client() else {
        return Served::default();
    };
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    if let Some(props) = get(&client, format!("{root}/props")).await {
        let served = Served {
            window: llama_cpp(&props),
            vision: llama_cpp_vision(&props),
        };
        if served.window.is_some() {
            return served;
        }
    }
    if let Some(window) = get(&client, format!("{base}/models"))
        .await
        .as_ref()
        .and_then(|models| listed(models, model))
    {
        return Served {
            window: Some(window),
            vision: None,
        };
    }
    let Some(shown) = post(
        &client,
        format!("{root}/api/show"),
        json!({ "model": model }),
    )
    .await
    else {
        return Served::default();
    };
    Served {
        window: ollama(&shown),
        vision: ollama_vision(&shown),
    }
}

/// The JSON a `POST url` with `body` answers with, if it answers with JSON.
async fn post(client: &reqwest::Client, url: String, body: Value) -> Option<Value> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(ASK_LIMIT)
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    serde_json::from_slice(&response.bytes().await.ok()?).ok()
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

/// llama.cpp's `/props`: `modalities.vision` (a server started with a
/// vision projector).
fn llama_cpp_vision(props: &Value) -> Option<bool> {
    props["modalities"]["vision"].as_bool()
}

/// Ollama's `/api/show`: whether `capabilities` lists `vision`.
fn ollama_vision(shown: &Value) -> Option<bool> {
    let capabilities = shown["capabilities"].as_array()?;
    Some(capabilities.iter().any(|c| c == "vision"))
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
        // Whether the model takes images, where the server says.
        assert_eq!(
            llama_cpp_vision(&json!({"modalities": {"vision": true, "audio": false}})),
            Some(true)
        );
        assert_eq!(llama_cpp_vision(&props), None);
        assert_eq!(
            ollama_vision(&json!({"capabilities": ["completion", "vision"]})),
            Some(true)
        );
        assert_eq!(
            ollama_vision(&json!({"capabilities": ["completion"]})),
            Some(false)
        );
        assert_eq!(ollama_vision(&shown), None);
        assert_eq!(ollama(&json!({"parameters": "temperature 0"})), None);
    }
}
