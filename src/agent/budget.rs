//! What of a conversation is sent to the model: consecutive messages of one
//! role merged (strict chat templates reject two user messages in a row,
//! and a report followed by a review is just that), and the whole kept
//! within the model's context window. The system prompt and the latest
//! exchange always go; older long messages (mostly execution output) are
//! shortened first, then the oldest are dropped.

use super::llm::{ChatMessage, Role};
use crate::text::{ceil_char_boundary, floor_char_boundary};

/// A model's context window when nothing more is known.
pub const DEFAULT_CONTEXT_TOKENS: usize = 8_192;

/// Tokens a message costs beyond its text (role markers, separators).
const PER_MESSAGE: usize = 8;

/// Tokens kept free besides the answer, for estimates that ran low.
const MARGIN: usize = 128;

/// How long an older message may stay once shortening starts.
const SHORTENED_CHARS: usize = 800;

/// An estimate of the tokens of `text` that errs high: tokenizers of
/// current models average three to four bytes a token on English and code.
pub fn estimate_tokens(text: &str) -> usize {
    text.len() / 3 + 1
}

/// What an image of at most 768 pixels a side costs, about (Anthropic
/// counts width x height / 750; OpenAI 85 plus 170 a 512-pixel tile).
const IMAGE_TOKENS: usize = 800;

fn cost(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| estimate_tokens(&m.content) + PER_MESSAGE + m.images.len() * IMAGE_TOKENS)
        .sum()
}

/// `messages` as they should be sent with `system` to a model whose context
/// window holds `context_tokens` and whose answer may take `max_tokens`.
pub fn fit(
    system: &str,
    messages: &[ChatMessage],
    context_tokens: usize,
    max_tokens: u32,
) -> Vec<ChatMessage> {
    let mut messages = merged(messages);
    // Anthropic requires the first message to be the user's.
    while messages.first().is_some_and(|m| m.role != Role::User) {
        messages.remove(0);
    }
    let available = context_tokens
        .saturating_sub(max_tokens as usize + estimate_tokens(system) + PER_MESSAGE + MARGIN)
        .max(64);
    if cost(&messages) <= available {
        return messages;
    }
    // Older long messages, mostly execution output, keep head and tail.
    let recent = messages.len().saturating_sub(2);
    for message in &mut messages[..recent] {
        message.content = shortened(&message.content, SHORTENED_CHARS);
    }
    // Then the oldest go, an exchange at a time, so a user message leads.
    while cost(&messages) > available && messages.len() > 1 {
        messages.remove(0);
        while messages.len() > 1 && messages[0].role != Role::User {
            messages.remove(0);
        }
    }
    // The latest message alone may still be too long.
    if cost(&messages) > available
        && let Some(last) = messages.last_mut()
    {
        last.content = shortened(&last.content, available.saturating_sub(PER_MESSAGE) * 3);
    }
    messages
}

/// Consecutive messages of one role as one message.
fn merged(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some(last) if last.role == message.role => {
                last.content.push_str("\n\n");
                last.content.push_str(&message.content);
                last.images.extend(message.images.iter().cloned());
            }
            _ => out.push(message.clone()),
        }
    }
    out
}

/// `text` cut to about `limit` bytes, keeping its head and tail.
fn shortened(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let half = limit / 2;
    let head_end = floor_char_boundary(text, half);
    let tail_start = ceil_char_boundary(text, text.len() - half);
    format!(
        "{}\n... [{} characters left out] ...\n{}",
        &text[..head_end],
        text[head_end..tail_start].chars().count(),
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> ChatMessage {
        ChatMessage::user(text)
    }

    fn assistant(text: &str) -> ChatMessage {
        ChatMessage::assistant(text)
    }

    #[test]
    fn consecutive_messages_of_a_role_are_merged() {
        let sent = fit(
            "",
            &[user("report"), user("review"), assistant("a"), user("q")],
            100_000,
            100,
        );
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[0].content, "report\n\nreview");
        assert_eq!(sent[0].role, Role::User);
    }

    #[test]
    fn a_conversation_that_fits_is_sent_whole() {
        let messages = [user("q1"), assistant("a1"), user("q2")];
        assert_eq!(fit("system", &messages, 100_000, 100), messages);
    }

    #[test]
    fn older_long_output_is_shortened_before_anything_is_dropped() {
        let long = "x".repeat(10_000);
        let messages = [
            user("first request"),
            assistant("code"),
            user(&format!("output: {long}")),
            assistant("more code"),
            user("the latest request"),
        ];
        let sent = fit("system", &messages, 2_000, 200);
        assert_eq!(sent.len(), 5, "all kept, shortened");
        assert!(sent[2].content.len() < 1_000);
        assert!(sent[2].content.contains("characters left out"));
        assert_eq!(sent[4].content, "the latest request");
    }

    #[test]
    fn the_oldest_exchanges_go_first_and_a_user_message_leads() {
        let mut messages = Vec::new();
        for i in 0..100 {
            messages.push(user(&format!("question {i} {}", "q".repeat(500))));
            messages.push(assistant(&format!("answer {i} {}", "a".repeat(500))));
        }
        messages.push(user("the latest request"));
        let sent = fit(&"s".repeat(3_000), &messages, 4_096, 600);
        assert!(sent.len() < messages.len());
        assert_eq!(sent[0].role, Role::User);
        assert_eq!(sent.last().unwrap().content, "the latest request");
        let total = estimate_tokens(&"s".repeat(3_000)) + cost(&sent) + 600;
        assert!(total <= 4_096, "{total} tokens");
        // What is kept is the newest part, in order.
        assert!(sent[sent.len() - 2].content.starts_with("answer 99"));
    }

    #[test]
    fn a_latest_message_too_long_for_the_window_keeps_its_head_and_tail() {
        let huge = format!("start {} end", "é".repeat(50_000));
        let sent = fit("", &[user(&huge)], 4_096, 600);
        assert_eq!(sent.len(), 1);
        let text = &sent[0].content;
        assert!(text.starts_with("start") && text.ends_with("end"));
        assert!(estimate_tokens(text) < 4_096);
    }

    #[test]
    fn a_leading_assistant_message_is_dropped() {
        let sent = fit("", &[assistant("orphan"), user("q")], 100_000, 100);
        assert_eq!(sent, [user("q")]);
    }
}
