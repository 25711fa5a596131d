//! A bounded pool for password hashing.
//!
//! Argon2 is slow and memory-hard on purpose: every hash or check takes about
//! 19 MiB for its whole run. Run on tokio's blocking pool with no cap, 200
//! wrong-password logins in parallel took the server from 15 MB to 6 GB: each
//! request got its own thread, its own 19 MiB and, with glibc, often its own
//! malloc arena that keeps the freed memory. So password work runs here
//! instead, on a fixed few threads of its own (about one per core: more could
//! not run at once anyway), and each thread keeps one Argon2 working memory
//! that it reuses for every hash (`secrets::Memory`, allocated at its first
//! hash). Memory for hashing is then exactly the number of threads times
//! 19 MiB: a fresh allocation per hash, even on a few threads, fragmented
//! glibc's arenas under load and grew them by several times that.
//!
//! A request waits for a free thread at most `wait`; past that it is refused
//! as busy (503 with `Retry-After`), instead of piling up in memory.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Semaphore};

use crate::secrets::Memory;
use crate::CredentialError;

type Job = Box<dyn FnOnce(&mut Memory) + Send + 'static>;

/// How long a refused request should wait before trying again.
const BUSY_RETRY_AFTER_SECONDS: u64 = 1;

pub struct HashingPool {
    /// One permit per thread: a job is queued only with a permit, so the
    /// queue never holds more than there are threads.
    permits: Arc<Semaphore>,
    jobs: mpsc::SyncSender<Job>,
    wait: Duration,
}

impl HashingPool {
    /// Starts `threads` hashing threads (at least one). They end when the
    /// pool is dropped.
    pub fn new(threads: usize, wait: Duration) -> HashingPool {
        let threads = threads.max(1);
        let (jobs, queue) = mpsc::sync_channel::<Job>(threads);
        let queue = Arc::new(Mutex::new(queue));
        for index in 0..threads {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("abode-hash-{index}"))
                .spawn(move || work(&queue));
            if let Err(error) = spawned {
                // Fewer threads only means less parallel hashing; with none,
                // every password request is refused as busy, which says so.
                tracing::error!(%error, "cannot start a password hashing thread");
            }
        }
        HashingPool {
            permits: Arc::new(Semaphore::new(threads)),
            jobs,
            wait,
        }
    }

    /// Runs `job` on a hashing thread; `Busy` when none is free within the
    /// pool's wait.
    pub async fn run<T, F>(&self, job: F) -> Result<T, CredentialError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Memory) -> T + Send + 'static,
    {
        let permit =
            match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                Ok(Err(_closed)) => return Err(busy()),
                Err(_elapsed) => return Err(busy()),
            };
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |memory: &mut Memory| {
            let _ = answer.send(job(memory));
        });
        // With a permit there is always room in the queue; a full or closed
        // queue (no thread could be started) is reported as busy.
        if self.jobs.try_send(job).is_err() {
            return Err(busy());
        }
        let result = answered
            .await
            .map_err(|_| CredentialError::Internal("a password hashing job failed".into()));
        drop(permit);
        result
    }
}

fn work(queue: &Mutex<mpsc::Receiver<Job>>) {
    let mut memory = Memory::new();
    loop {
        let job = match queue.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_poisoned) => return,
        };
        let Ok(job) = job else {
            // The pool was dropped.
            return;
        };
        // A panic drops the job's answer (the caller gets an internal error)
        // and must not take the thread with it.
        if std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut memory))).is_err() {
            tracing::error!("a password hashing job panicked");
        }
    }
}

fn busy() -> CredentialError {
    CredentialError::Busy {
        message: "the server is busy checking passwords; try again in a moment".into(),
        retry_after_seconds: BUSY_RETRY_AFTER_SECONDS,
    }
}

/// About one thread per core, and no more than four: more would not hash
/// faster on this machine, only use more memory.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|cores| cores.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_more_jobs_at_once_than_threads_and_excess_is_busy() {
        let pool = Arc::new(HashingPool::new(2, Duration::from_millis(300)));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let pool = Arc::clone(&pool);
            let running = Arc::clone(&running);
            let most = Arc::clone(&most);
            tasks.push(tokio::spawn(async move {
                pool.run(move |_| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(200));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            }));
        }
        let mut done = 0;
        let mut busy = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => done += 1,
                Err(CredentialError::Busy {
                    retry_after_seconds,
                    ..
                }) => {
                    assert_eq!(retry_after_seconds, 1);
                    busy += 1;
                }
                Err(other) => panic!("unexpected {other}"),
            }
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        // 2 threads, 200 ms each, 300 ms of waiting: 2 run at once, 2 more
        // get a thread in time, the rest are refused.
        assert!(done >= 2 && busy >= 2, "done {done}, busy {busy}");
        assert_eq!(done + busy, 8);
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_thread_lives_on() {
        let pool = HashingPool::new(1, Duration::from_secs(5));
        let result: Result<(), _> = pool.run(|_| panic!("boom")).await;
        assert!(matches!(result, Err(CredentialError::Internal(_))));
        assert_eq!(pool.run(|_| 7).await.unwrap(), 7);
    }
}
