//! Messages that must be dropped (malformed, wrongly signed, unsigned,
//! replayed, oversized): no reply, no status, no crash, and the next good
//! request is served normally.

use std::time::Duration;

use bytes::Bytes;
use mahtab::wire::{DELIMITER, Signer};
use serde_json::json;

use crate::support::{Channel, Kernel, parent_id};

fn frames(signer: &Signer, header: &[u8], content: &[u8]) -> Vec<Bytes> {
    let parts: [&[u8]; 4] = [header, b"{}", b"{}", content];
    let mut frames = vec![
        Bytes::from_static(DELIMITER),
        Bytes::from(signer.sign(&parts)),
    ];
    frames.extend(parts.iter().map(|p| Bytes::copy_from_slice(p)));
    frames
}

fn header(msg_id: &str) -> Vec<u8> {
    json!({ "msg_id": msg_id, "msg_type": "kernel_info_request", "session": "s",
            "username": "u", "date": "2026-01-01T00:00:00Z", "version": "5.3" })
    .to_string()
    .into_bytes()
}

/// Sends `bad` on `channel`, then a good kernel_info_request; the first
/// reply must be the good one's, and the kernel must still be alive.
async fn dropped_then_served(kernel: &mut Kernel, channel: Channel, bad: Vec<Bytes>) {
    kernel.send_frames(channel, bad).await;
    let good = kernel.send(channel, "kernel_info_request", json!({})).await;
    let reply = kernel.reply(channel).await;
    assert_eq!(
        parent_id(&reply),
        good,
        "the bad message must not be answered"
    );
    assert_eq!(reply.content["status"], "ok");
    let iopub = kernel.iopub_for(&good).await;
    assert_eq!(iopub.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_unauthentic_messages_are_dropped() {
    let mut kernel = Kernel::start().await;
    let signer = kernel.signer().clone();
    let wrong_key = Signer::new("hmac-sha256", b"not the key").unwrap();
    let unsigned = Signer::unsigned();

    let mut no_delimiter = frames(&signer, &header("a"), b"{}");
    no_delimiter.remove(0);
    let too_few = frames(&signer, &header("b"), b"{}")[..4].to_vec();
    let bad_json = frames(&signer, &header("c"), b"{oops");
    let no_msg_type = frames(&signer, br#"{"msg_id": "d"}"#, b"{}");
    let header_not_object = frames(&signer, b"[1, 2]", b"{}");
    let wrong_signature = frames(&wrong_key, &header("e"), b"{}");
    let not_signed = frames(&unsigned, &header("f"), b"{}");
    let mut bad_hex = frames(&signer, &header("g"), b"{}");
    bad_hex[1] = Bytes::from_static(b"zz-not-hex");
    let binary_garbage = vec![Bytes::from_static(&[0xff, 0x00, 0xfe])];

    for (channel, bad) in [
        (Channel::Shell, no_delimiter.clone()),
        (Channel::Control, no_delimiter),
        (Channel::Shell, too_few),
        (Channel::Shell, bad_json),
        (Channel::Shell, no_msg_type),
        (Channel::Shell, header_not_object),
        (Channel::Shell, wrong_signature.clone()),
        (Channel::Control, wrong_signature),
        (Channel::Shell, not_signed),
        (Channel::Shell, bad_hex),
        (Channel::Shell, binary_garbage),
    ] {
        dropped_then_served(&mut kernel, channel, bad).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn replayed_messages_are_dropped_on_any_channel() {
    let mut kernel = Kernel::start().await;
    let signer = kernel.signer().clone();
    let original = frames(&signer, &header("replay-me"), b"{}");
    kernel.send_frames(Channel::Shell, original.clone()).await;
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&reply), "replay-me");
    kernel.iopub_for("replay-me").await;

    dropped_then_served(&mut kernel, Channel::Shell, original.clone()).await;
    dropped_then_served(&mut kernel, Channel::Control, original.clone()).await;
    // Hex is case-insensitive: the same tag in upper case is the same message.
    let mut shouted = original;
    shouted[1] = Bytes::from(shouted[1].to_ascii_uppercase());
    dropped_then_served(&mut kernel, Channel::Shell, shouted).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_messages_are_dropped() {
    let mut kernel = Kernel::start().await;
    let signer = kernel.signer().clone();
    let code = "x".repeat(mahtab::wire::MAX_MESSAGE_BYTES + 1);
    let content = json!({ "code": code }).to_string();
    let huge = frames(&signer, &header("huge"), content.as_bytes());
    dropped_then_served(&mut kernel, Channel::Shell, huge).await;
    // Nothing else was queued behind it.
    assert!(
        kernel
            .reply_within(Channel::Shell, Duration::from_millis(200))
            .await
            .is_none()
    );
}
