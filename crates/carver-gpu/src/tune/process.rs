//! Worker processes with a watchdog: a request that gets no answer in time kills the worker,
//! and the next request starts a fresh one.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Timing;
use super::protocol::{CandidateMeasurement, Reply, Request, WorkerInfo};
use crate::error::GpuError;

/// How long a worker may take to open the device and fill its inputs.
const SETUP_TIMEOUT: Duration = Duration::from_secs(180);
/// Bytes of the worker's stderr kept for failure messages.
const STDERR_TAIL: usize = 2000;

/// Why a candidate has no measurement.
#[derive(Debug)]
pub(super) struct CandidateFailure {
    pub reason: String,
    /// The worker crashed, hung or lost its context (a fresh one takes the next request).
    pub worker_lost: bool,
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Worker {
    fn spawn(mut cmd: Command) -> Result<Self, GpuError> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| GpuError::Worker(format!("cannot start {cmd:?}: {e}")))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = channel();
        let out_reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let err_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = sink.lock().expect("stderr buffer");
                kept.extend_from_slice(&buf[..n]);
                let excess = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..excess);
            }
        });
        Ok(Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            readers: vec![out_reader, err_reader],
        })
    }

    /// Sends one request and waits for its reply; `Err` describes a worker that died or hung
    /// (it is killed).
    fn call(&mut self, request: &Request, timeout: Duration) -> Result<Reply, String> {
        let line = serde_json::to_string(request).expect("requests serialize");
        let sent = match self.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|()| stdin.flush()),
            None => Err(std::io::Error::other("stdin closed")),
        };
        if sent.is_err() {
            return Err(self.terminate("the worker stopped reading its requests"));
        }
        loop {
            match self.lines.recv_timeout(timeout) {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => {
                    return serde_json::from_str::<Reply>(&line).map_err(|e| {
                        self.terminate(&format!("the worker answered `{line}`, not a reply ({e})"))
                    });
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.terminate(&format!(
                        "no answer within {:.0} s (hung or far too slow); the worker was killed",
                        timeout.as_secs_f64()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.terminate("the worker exited"));
                }
            }
        }
    }

    /// Kills the worker (if it still runs) and describes how it ended.
    fn terminate(&mut self, what: &str) -> String {
        let _ = self.child.kill();
        let status = self.child.wait();
        self.stdin = None;
        // Let the readers drain what the worker wrote last; a grandchild still holding the
        // pipes open must not block us, so they are left behind after a short wait.
        let deadline = std::time::Instant::now() + Duration::from_millis(500);
        while self.readers.iter().any(|r| !r.is_finished()) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.readers.clear();
        let status = match status {
            Ok(s) => describe_status(s),
            Err(e) => format!("status unknown ({e})"),
        };
        let tail =
            String::from_utf8_lossy(&self.stderr.lock().expect("stderr buffer")).into_owned();
        let tail = tail.trim();
        if tail.is_empty() {
            format!("{what} ({status})")
        } else {
            format!("{what} ({status}); its stderr ended with: {tail}")
        }
    }
}

fn describe_status(s: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match s.code() {
        Some(c) => format!("exit status {c}"),
        None => "no exit status".into(),
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The current worker and how to start another.
pub(super) struct WorkerPool<'a> {
    make: &'a dyn Fn() -> Command,
    setup: Request,
    current: Option<Worker>,
    started: usize,
}

impl<'a> WorkerPool<'a> {
    pub fn new(make: &'a dyn Fn() -> Command, setup: Request) -> Self {
        Self {
            make,
            setup,
            current: None,
            started: 0,
        }
    }

    /// Workers started after the first.
    pub fn restarts(&self) -> usize {
        self.started.saturating_sub(1)
    }

    /// Starts a worker and sets it up; a worker that cannot be set up is an error of the run.
    pub fn start(&mut self) -> Result<WorkerInfo, GpuError> {
        let mut w = Worker::spawn((self.make)())?;
        self.started += 1;
        match w.call(&self.setup, SETUP_TIMEOUT) {
            Ok(Reply::Ready(info)) => {
                self.current = Some(w);
                Ok(info)
            }
            Ok(Reply::Error { message }) => Err(GpuError::Worker(message)),
            Ok(other) => Err(GpuError::Worker(format!(
                "unexpected answer to setup: {other:?}"
            ))),
            Err(e) => Err(GpuError::Worker(format!("setup failed: {e}"))),
        }
    }

    fn worker(&mut self) -> Result<&mut Worker, GpuError> {
        if self.current.is_none() {
            self.start()?;
        }
        Ok(self.current.as_mut().expect("started above"))
    }

    /// Times cuBLAS; its failure ends the run (there is nothing to compare against).
    pub fn cublas(&mut self, timeout: Duration) -> Result<Timing, GpuError> {
        let w = self.worker()?;
        match w.call(&Request::Cublas, timeout) {
            Ok(Reply::Cublas(t)) => Ok(t),
            Ok(Reply::Error { message }) => Err(GpuError::Worker(message)),
            Ok(other) => Err(GpuError::Worker(format!(
                "unexpected answer to the cuBLAS request: {other:?}"
            ))),
            Err(e) => {
                self.current = None;
                Err(GpuError::Worker(format!("cuBLAS timing failed: {e}")))
            }
        }
    }

    /// Runs one candidate. The outer error ends the run (a fresh worker could not be set up);
    /// the inner one is the candidate's failure.
    pub fn candidate(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> Result<Result<CandidateMeasurement, CandidateFailure>, GpuError> {
        let w = self.worker()?;
        let outcome = match w.call(request, timeout) {
            Ok(Reply::Candidate(m)) => Ok(m),
            Ok(Reply::Rejected {
                reason,
                context_lost,
            }) => {
                if context_lost {
                    // The worker exits by itself; make sure of it and collect what it said.
                    let ended = w.terminate("the candidate left the CUDA context unusable");
                    self.current = None;
                    Err(CandidateFailure {
                        reason: format!("{reason} [{ended}]"),
                        worker_lost: true,
                    })
                } else {
                    Err(CandidateFailure {
                        reason,
                        worker_lost: false,
                    })
                }
            }
            Ok(Reply::Error { message }) => Err(CandidateFailure {
                reason: message,
                worker_lost: false,
            }),
            Ok(other) => Err(CandidateFailure {
                reason: format!("unexpected answer: {other:?}"),
                worker_lost: false,
            }),
            Err(e) => {
                self.current = None;
                Err(CandidateFailure {
                    reason: format!("worker lost: {e}"),
                    worker_lost: true,
                })
            }
        };
        Ok(outcome)
    }

    /// Asks the worker to exit (killing it if it does not answer promptly).
    pub fn finish(mut self) {
        if let Some(mut w) = self.current.take() {
            let _ = w.call(&Request::Exit, Duration::from_secs(10));
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn a_hung_worker_is_killed_by_the_watchdog() {
        let mut w = Worker::spawn(shell("echo started >&2; sleep 30")).unwrap();
        let t = std::time::Instant::now();
        let e = w
            .call(&Request::Cublas, Duration::from_millis(300))
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(e.contains("no answer within"), "{e}");
        assert!(e.contains("killed by signal 9"), "{e}");
        assert!(e.contains("started"), "{e}");
    }

    #[test]
    fn a_crashed_worker_is_reported_with_its_status_and_stderr() {
        let mut w = Worker::spawn(shell("read line; echo 'fault here' >&2; exit 3")).unwrap();
        let e = w
            .call(&Request::Cublas, Duration::from_secs(20))
            .unwrap_err();
        assert!(e.contains("exited"), "{e}");
        assert!(e.contains("exit status 3"), "{e}");
        assert!(e.contains("fault here"), "{e}");
    }

    #[test]
    fn replies_are_read_and_garbage_is_a_failure() {
        let mut w = Worker::spawn(shell(
            "read line; echo '{\"reply\":\"error\",\"message\":\"no GPU\"}'; read line; echo garbage; sleep 5",
        ))
        .unwrap();
        match w.call(&Request::Cublas, Duration::from_secs(20)).unwrap() {
            Reply::Error { message } => assert_eq!(message, "no GPU"),
            other => panic!("{other:?}"),
        }
        let e = w
            .call(&Request::Cublas, Duration::from_secs(20))
            .unwrap_err();
        assert!(e.contains("garbage"), "{e}");
    }

    #[test]
    fn the_pool_restarts_a_lost_worker_and_counts_it() {
        // Each worker answers setup, then dies on the next request.
        let make = || {
            shell(
                "read line; echo '{\"reply\":\"ready\",\"device_name\":\"fake\",\"compute_capability\":[9,0],\"sms\":1,\"l2_bytes\":1,\"input_sets\":2,\"set_bytes\":4}'; read line; exit 1",
            )
        };
        let mut pool = WorkerPool::new(&make, Request::Exit);
        let info = pool.start().unwrap();
        assert_eq!(info.device_name, "fake");
        let req = Request::Cublas;
        for _ in 0..2 {
            let r = pool.candidate(&req, Duration::from_secs(20)).unwrap();
            let f = r.unwrap_err();
            assert!(f.worker_lost);
            assert!(f.reason.contains("exit status 1"), "{}", f.reason);
        }
        assert_eq!(pool.restarts(), 1);
    }

    #[test]
    fn a_worker_that_cannot_set_up_is_an_error() {
        let make =
            || shell("read line; echo '{\"reply\":\"error\",\"message\":\"GPU 0 is not Hopper\"}'");
        let mut pool = WorkerPool::new(&make, Request::Exit);
        let e = pool.start().unwrap_err();
        assert!(e.to_string().contains("not Hopper"), "{e}");
    }
}
