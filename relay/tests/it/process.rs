//! The relay as its own process: how it starts and stops.
// Test code: a panic is how it reports.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CONFIG: &str = r#"
listen = "127.0.0.1:0"
admin_token = "a-token-of-at-least-32-characters-long"

[[sources]]
name = "web"
write_keys = ["wk"]
[sources.webhooks]
urls = ["http://127.0.0.1:9/hook"]
shared_secret = "a-shared-secret"

[security]
allow_private_networks = true
"#;

/// A deploy may stop the relay at any moment of its start: a SIGTERM sent
/// at its first log line (the database opened, long before it listens) is
/// a graceful stop (exit 0, "relay stopped"), never the default kill.
#[test]
fn a_sigterm_during_the_start_stops_the_relay_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, CONFIG).unwrap();
    for run in 0..3 {
        let database = format!("sqlite:///{}/relay-{run}.db", dir.path().display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_callpost-relay"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "--database",
                &database,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, seen) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        // The first line of the database's: the schema it migrated.
        let mut log = Vec::new();
        loop {
            let line = seen
                .recv_timeout(Duration::from_secs(60))
                .expect("the relay logs as it starts");
            let migrated = line.contains("schema migrated");
            log.push(line);
            if migrated {
                break;
            }
        }
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        log.extend(seen.iter());
        assert!(
            status.success(),
            "run {run}: {status} after SIGTERM: {log:#?}"
        );
        assert!(
            log.iter().any(|l| l.contains("relay stopped")),
            "run {run}: {log:#?}"
        );
    }
}

/// The relay raises its soft limit on open files to the hard one as it
/// starts (services start at 1,024, below the default connection cap), and
/// warns when the limit is below what its caps can hold open.
#[test]
fn the_relay_raises_its_open_files_limit_and_says_when_it_is_short() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let database = format!("sqlite:///{}/relay.db", dir.path().display());
    // Soft 256 and hard 512: raised to 512, and short of the 10,000
    // connections the default cap allows.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "ulimit -Sn 256 && ulimit -Hn 512 && exec \"$@\"",
            "relay",
            env!("CARGO_BIN_EXE_callpost-relay"),
            "--config",
            config.to_str().unwrap(),
            "--database",
            &database,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut log = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        let listening = line.contains("listening on");
        log.push(line);
        if listening {
            break;
        }
    }
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = files.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["512", "512"], "{files}");
    assert!(
        log.iter()
            .any(|l| l.contains("soft limit raised from 256 to 512")),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("open files: the limit is 512")),
        "{log:#?}"
    );
}
