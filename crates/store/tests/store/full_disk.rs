//! SQLite on a disk that fills (a real tmpfs; the test runs as root): a
//! write the disk cannot take is an error, never reported done and then
//! lost, and once space returns every connection of the pool writes again
//! (none is left holding a transaction SQLite already rolled back).

use abode_store::*;

use crate::common::*;

/// A tmpfs of `size` at a new directory, unmounted when dropped.
struct Tmpfs {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::create_dir_all(&path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(
            mounted.success(),
            "cannot mount a tmpfs (this test fills a real filesystem: run it as root)"
        );
        Tmpfs { _dir: dir, path }
    }

    /// Fills what is left with a file; removing it gives the space back.
    fn fill(&self) -> std::path::PathBuf {
        let file = self.path.join("fill");
        let _ = std::process::Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", file.display()))
            .args(["bs=64k", "count=100000"])
            .stderr(std::process::Stdio::null())
            .status();
        file
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_fails_writes_loudly_and_the_pool_recovers() {
    let disk = Tmpfs::mount("8m");
    let store = Store::open_sqlite(&disk.path.join("abode.db"))
        .await
        .unwrap();
    let (user, workspace, build) = seeded(&store).await;
    let line = |text: &str| NewLogLine {
        stage: LogStage::APPLY,
        level: LogLevel::Info,
        text: text.into(),
    };
    store.append_log(&build.id, &line("before")).await.unwrap();

    let filler = disk.fill();
    let state = vec![b'x'; 512 * 1024];
    let error = store
        .put_state_replacing(&workspace.id, &build.id, &state, None, Placement::Nowhere)
        .await
        .unwrap_err();
    assert!(error.is_disk_full() && error.is_transient(), "{error}");
    // Every kind of write meets the full disk, and says so.
    let mut reported_written = vec!["before".to_string()];
    for n in 0..20 {
        let text = format!("full {n}");
        match store.append_log(&build.id, &line(&text)).await {
            Err(error) => assert!(error.is_transient(), "{error}"),
            // A small write may still fit; then it must really be there.
            Ok(_) => reported_written.push(text),
        }
        let _ = store
            .create_build(&next_build(&workspace, &user, "stop"))
            .await;
        let _ = store.claim_job("embedded-0", "server-a", 30_000).await;
    }

    // Space returns: every write works again, on every pooled connection,
    // without a restart, and nothing reported written was lost.
    std::fs::remove_file(&filler).unwrap();
    for n in 0..20 {
        store
            .append_log(&build.id, &line(&format!("after {n}")))
            .await
            .unwrap();
    }
    store
        .put_state_replacing(&workspace.id, &build.id, &state, None, Placement::Nowhere)
        .await
        .unwrap();
    store
        .claim_job("embedded-0", "server-a", 30_000)
        .await
        .unwrap();
    let logged: Vec<String> = store
        .logs_after(&build.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|line| line.text)
        .collect();
    let after: Vec<String> = (0..20).map(|n| format!("after {n}")).collect();
    assert_eq!(logged, [reported_written, after].concat());
    store.close().await;
}
