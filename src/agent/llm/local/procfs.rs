//! What Linux's /proc says of a process or a listening socket: who owns it,
//! what it runs, how much memory it holds. The shared local model server is
//! used only when both it and its port belong to this user.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;

/// This process's effective user.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The user a running process belongs to; `None` when there is no such
/// process.
pub fn owner(pid: u32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|meta| meta.uid())
}

/// A process's arguments (empty for a zombie); `None` when it is gone.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect(),
    )
}

/// A process's resident memory in bytes.
pub fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The processes of user `uid`.
pub fn processes_of(uid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid| owner(*pid) == Some(uid))
        .collect();
    pids.sort_unstable();
    pids
}

/// The user whose socket listens on `127.0.0.1:port`; `None` when nothing
/// does.
pub fn loopback_listener_owner(port: u16) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    listener_owner_in(&table, Ipv4Addr::LOCALHOST, port)
}

/// The owner of the listening socket on `addr:port` in a `/proc/net/tcp`
/// table: `sl local_address rem_address st ... uid ...`, addresses as hex
/// words in the host's byte order and ports in hex; state `0A` listens.
fn listener_owner_in(table: &str, addr: Ipv4Addr, port: u16) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, state, uid) = (fields.get(1)?, fields.get(3)?, fields.get(7)?);
        let (host, local_port) = local.split_once(':')?;
        let host = Ipv4Addr::from(u32::from_str_radix(host, 16).ok()?.to_ne_bytes());
        let local_port = u16::from_str_radix(local_port, 16).ok()?;
        (*state == "0A" && host == addr && local_port == port)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_is_found_with_its_owner() {
        let word = |addr: Ipv4Addr| format!("{:08X}", u32::from_ne_bytes(addr.octets()));
        let local = word(Ipv4Addr::LOCALHOST);
        let any = word(Ipv4Addr::UNSPECIFIED);
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: {local}:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n\
             1: {local}:1F91 {local}:C000 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n\
             2: {any}:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     7        0 3 1\n"
        );
        assert_eq!(
            listener_owner_in(&table, Ipv4Addr::LOCALHOST, 0x1F90),
            Some(1000)
        );
        // Connected, not listening; and a listener on another address.
        assert_eq!(listener_owner_in(&table, Ipv4Addr::LOCALHOST, 0x1F91), None);
        assert_eq!(listener_owner_in(&table, Ipv4Addr::LOCALHOST, 0x1F92), None);
        assert_eq!(
            listener_owner_in("garbage\n1: x y", Ipv4Addr::LOCALHOST, 1),
            None
        );
    }

    #[test]
    fn this_process_is_seen_as_it_is() {
        let pid = std::process::id();
        assert_eq!(owner(pid), Some(euid()));
        assert!(!cmdline(pid).unwrap().is_empty());
        assert!(resident_bytes(pid).unwrap() > 0);
        assert!(processes_of(euid()).contains(&pid));
    }

    #[test]
    fn a_listening_socket_of_ours_is_seen_as_ours() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(loopback_listener_owner(port), Some(euid()));
        drop(listener);
        assert_eq!(loopback_listener_owner(port), None);
    }
}
