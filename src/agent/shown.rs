//! What a run shows, as typed values: text streamed into the cell and
//! panels, new or updated in place. The agent builds them (`render/`) and
//! hands them to its ports; the kernel's port makes them IOPub messages
//! ([`Shown::msg_type`], [`Shown::content`]) at its edge.

use serde::Serialize;
use serde_json::Value;

/// One IOPub message of a run, as typed values: the kernel's port makes
/// it a message ([`Shown::msg_type`], [`Shown::content`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// Text in the cell's stdout.
    Stream(String),
    Display(Display),
}

/// A panel: text for consoles, Markdown for notebooks where there is any,
/// what it is (`mahtab.kind` and its details) and, for a panel updated in
/// place, its display id.
#[derive(Debug, Clone, PartialEq)]
pub struct Display {
    pub plain: String,
    pub markdown: Option<String>,
    /// The panel's `mahtab` metadata.
    pub mahtab: Value,
    pub display_id: Option<String>,
    pub placement: Placement,
}

/// Whether a panel is new (`display_data`) or takes the place of the one
/// shown under its display id (`update_display_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    New,
    InPlace,
}

/// A `stream` message's content.
#[derive(Serialize)]
struct StreamContent<'a> {
    name: &'static str,
    text: &'a str,
}

/// A `display_data` (or `update_display_data`) message's content.
#[derive(Serialize)]
struct DisplayContent<'a> {
    data: Bundle<'a>,
    metadata: Metadata<'a>,
    transient: Transient<'a>,
}

#[derive(Serialize)]
struct Bundle<'a> {
    #[serde(rename = "text/plain")]
    plain: &'a str,
    #[serde(rename = "text/markdown", skip_serializing_if = "Option::is_none")]
    markdown: Option<&'a str>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    mahtab: &'a Value,
}

#[derive(Serialize)]
struct Transient<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    display_id: Option<&'a str>,
}

impl Shown {
    /// A panel: `plain` (and `markdown`), described by `mahtab` (its
    /// metadata), under `display_id` when it is updated in place.
    pub fn display(
        placement: Placement,
        plain: String,
        markdown: Option<String>,
        mahtab: Value,
        display_id: Option<&str>,
    ) -> Self {
        Shown::Display(Display {
            plain,
            markdown,
            mahtab,
            display_id: display_id.map(str::to_owned),
            placement,
        })
    }

    /// The text a console shows of it.
    pub fn plain(&self) -> &str {
        match self {
            Shown::Stream(text) => text,
            Shown::Display(display) => &display.plain,
        }
    }

    /// The IOPub message type.
    pub fn msg_type(&self) -> &'static str {
        match self {
            Shown::Stream(_) => "stream",
            Shown::Display(Display {
                placement: Placement::New,
                ..
            }) => "display_data",
            Shown::Display(Display {
                placement: Placement::InPlace,
                ..
            }) => "update_display_data",
        }
    }

    /// The message's content, as the messaging protocol has it.
    pub fn content(&self) -> Value {
        let content = match self {
            Shown::Stream(text) => serde_json::to_value(StreamContent {
                name: "stdout",
                text,
            }),
            Shown::Display(display) => serde_json::to_value(DisplayContent {
                data: Bundle {
                    plain: &display.plain,
                    markdown: display.markdown.as_deref(),
                },
                metadata: Metadata {
                    mahtab: &display.mahtab,
                },
                transient: Transient {
                    display_id: display.display_id.as_deref(),
                },
            }),
        };
        content.unwrap_or_default()
    }
}
