//! A corpus of bad input to the `carver` command: arguments, environment variables, paths that
//! are not what they claim, a closed stdout, a machine without a GPU. Every case must end within
//! a time limit, never panic, and either succeed (where the input is actually fine: an empty
//! variable counts as unset) or exit non-zero with a message that says what was wrong.
//!
//! One case is one line of `cases()`. The test runs them all, prints each outcome and a count,
//! and fails listing every case that did not behave.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[allow(dead_code)] // the shared `carver` helper sets --cache-dir, which cases here vary
mod common;
use common::{carver_bin, text};

/// No case may take longer (a debug build; none does anything slow).
const LIMIT: Duration = Duration::from_secs(60);

/// A small problem, for the commands that need one.
const SHAPE: [&str; 6] = ["--m", "64", "--n", "64", "--k", "64"];

enum Expect {
    /// Exit status 0, and this text on standard output.
    Success(&'static str),
    /// A non-zero exit status, and this text on standard error.
    Failure(&'static str),
    /// Anything but a panic or a hang (a closed stdout may end the process by SIGPIPE).
    NoPanic,
}

/// What a case needs of the machine, to be meaningful.
#[derive(PartialEq)]
enum Needs {
    Nothing,
    /// No working GPU (with one, `tune` would tune).
    NoGpu,
    /// Not running as root (root reads a directory whatever its permissions).
    NotRoot,
}

struct Case {
    name: String,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    expect: Expect,
    needs: Needs,
    close_stdout: bool,
}

/// `carver ARGS` (with `--cache-dir` of the fixture's cache unless the case sets its own).
fn run(name: &str, args: &[&str]) -> Case {
    Case {
        name: name.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        expect: Expect::Success(""),
        needs: Needs::Nothing,
        close_stdout: false,
    }
}

/// `carver recommend` on [`SHAPE`] with `extra` arguments.
fn recommend(name: &str, extra: &[&str]) -> Case {
    let args: Vec<&str> = ["recommend"]
        .iter()
        .chain(SHAPE.iter())
        .chain(extra)
        .copied()
        .collect();
    run(name, &args)
}

impl Case {
    fn env(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.env.push((name, value.into()));
        self
    }
    fn fails(mut self, needle: &'static str) -> Self {
        self.expect = Expect::Failure(needle);
        self
    }
    /// Succeeds, printing `needle`.
    fn says(mut self, needle: &'static str) -> Self {
        self.expect = Expect::Success(needle);
        self
    }
    fn no_panic(mut self) -> Self {
        self.expect = Expect::NoPanic;
        self
    }
    fn needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }
    fn stdout_closed(mut self) -> Self {
        self.close_stdout = true;
        self
    }
}

/// Paths the cases point at, in one temporary directory.
struct Fixtures {
    root: TempDir,
}

impl Fixtures {
    fn new() -> Self {
        let root = TempDir::new().unwrap();
        let p = root.path();
        for dir in [
            "cache",
            "cwd",
            "home",
            "xdg",
            "shapes-dir",
            "db-with-a-dir",
            "db-unreadable",
        ] {
            std::fs::create_dir(p.join(dir)).unwrap();
        }
        std::fs::write(p.join("a-file"), b"not a directory\n").unwrap();
        // A hardware file that cannot be read: a directory with the name of one.
        std::fs::create_dir(p.join("db-with-a-dir").join("gpu.toml")).unwrap();
        set_mode(&p.join("db-unreadable"), 0o000);
        Self { root }
    }

    fn path(&self, name: &str) -> String {
        self.root.path().join(name).display().to_string()
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        // So that the temporary directory can be removed.
        set_mode(&self.root.path().join("db-unreadable"), 0o755);
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn cases(fx: &Fixtures) -> Vec<Case> {
    let file = fx.path("a-file");
    let file_child = fx.path("a-file/sub");
    let missing = fx.path("does-not-exist");
    let with_dir = fx.path("db-with-a-dir");
    let unreadable = fx.path("db-unreadable");
    let shapes_dir = fx.path("shapes-dir");
    let new_dir = fx.path("cache/new/deeper");
    vec![
        // Empty or blank CARVER_* variables are unset.
        recommend("empty CARVER_CACHE_DIR", &[]).env("CARVER_CACHE_DIR", ""),
        recommend("blank CARVER_CACHE_DIR", &[]).env("CARVER_CACHE_DIR", "  \t"),
        run("empty CARVER_HARDWARE_DB", &["arch", "list"]).env("CARVER_HARDWARE_DB", ""),
        run("blank CARVER_HARDWARE_DB", &["arch", "show", "h100"]).env("CARVER_HARDWARE_DB", " "),
        run("both empty, completions", &["completions", "bash"])
            .env("CARVER_CACHE_DIR", "")
            .env("CARVER_HARDWARE_DB", ""),
        // The cache directory's fallbacks, as `cache list` names the database.
        run("empty CARVER_CACHE_DIR, cache list", &["cache", "list"])
            .env("CARVER_CACHE_DIR", "")
            .says("/xdg/carver/"),
        run(
            "empty XDG_CACHE_HOME falls back to ~/.cache",
            &["cache", "list"],
        )
        .env("CARVER_CACHE_DIR", "")
        .env("XDG_CACHE_HOME", "")
        .says("/home/.cache/carver/"),
        run("relative XDG_CACHE_HOME is ignored", &["cache", "list"])
            .env("CARVER_CACHE_DIR", " ")
            .env("XDG_CACHE_HOME", "relative/dir")
            .says("/home/.cache/carver/"),
        recommend("empty XDG_CACHE_HOME, recommend", &[])
            .env("CARVER_CACHE_DIR", "")
            .env("XDG_CACHE_HOME", ""),
        // Cache and hardware directories that are not directories.
        recommend("--cache-dir \"\"", &["--cache-dir", ""])
            .fails("an empty path names no directory"),
        recommend("--hardware-db \"\"", &["--hardware-db", ""])
            .fails("an empty path names no directory"),
        recommend("--cache-dir is a file", &["--cache-dir", &file])
            .fails("is a file, not a directory"),
        recommend("CARVER_CACHE_DIR is a file", &[])
            .env("CARVER_CACHE_DIR", &file)
            .fails("is a file, not a directory"),
        recommend("--cache-dir under a file", &["--cache-dir", &file_child])
            .fails("Not a directory"),
        recommend("--cache-dir not there yet", &["--cache-dir", &new_dir]),
        run(
            "--hardware-db is a file",
            &["--hardware-db", &file, "arch", "list"],
        )
        .fails("not a directory"),
        run("CARVER_HARDWARE_DB is a file", &["arch", "list"])
            .env("CARVER_HARDWARE_DB", &file)
            .fails("not a directory"),
        run(
            "--hardware-db missing",
            &["--hardware-db", &missing, "arch", "list"],
        )
        .fails("does not exist"),
        run(
            "--hardware-db with an unreadable file",
            &["--hardware-db", &with_dir, "arch", "list"],
        )
        .fails("gpu.toml"),
        run(
            "--hardware-db unreadable",
            &["--hardware-db", &unreadable, "arch", "list"],
        )
        .fails("db-unreadable")
        .needs(Needs::NotRoot),
        // Numbers.
        recommend("--topk 0", &["--topk", "0"]).fails("accepted 1 to 1024"),
        recommend("--topk 1000000000", &["--topk", "1000000000"]).fails("accepted 1 to 1024"),
        recommend("--topk -1", &["--topk", "-1"]).fails("accepted 1 to 1024"),
        recommend("--topk abc", &["--topk", "abc"]).fails("accepted 1 to 1024"),
        run(
            "--m 0",
            &["recommend", "--m", "0", "--n", "64", "--k", "64"],
        )
        .fails("at least 1"),
        run(
            "--m -5",
            &["recommend", "--m", "-5", "--n", "64", "--k", "64"],
        )
        .fails("not a whole number"),
        run(
            "--m 1e3",
            &["recommend", "--m", "1e3", "--n", "64", "--k", "64"],
        )
        .fails("not a whole number"),
        run(
            "--m 99999999999999999999",
            &[
                "recommend",
                "--m",
                "99999999999999999999",
                "--n",
                "64",
                "--k",
                "64",
            ],
        )
        .fails("exceeds the largest supported size"),
        run(
            "--k 2^31",
            &["recommend", "--m", "64", "--n", "64", "--k", "2147483648"],
        )
        .fails("exceeds the largest supported size"),
        recommend("--batch 0", &["--batch", "0"]).fails("at least 1"),
        run(
            "tune --n -1",
            &["tune", "--m", "64", "--n", "-1", "--k", "64"],
        )
        .fails("not a whole number"),
        run(
            "bench --k 0",
            &["bench", "--m", "64", "--n", "64", "--k", "0"],
        )
        .fails("at least 1"),
        // Names.
        recommend("--arch \"\"", &["--arch", ""]).fails("an empty GPU name"),
        recommend("--arch h100, (empty second name)", &["--arch", "h100,"])
            .fails("an empty GPU name"),
        run("arch show \"\"", &["arch", "show", ""]).fails("an empty GPU name"),
        recommend("--arch h1000", &["--arch", "h1000"]).fails("did you mean `h100-sxm`?"),
        recommend("--target cutlass", &["--target", "cutlass"])
            .fails("accepted: triton, tilelang, cuda-sm90, generic"),
        recommend("--layout xx", &["--layout", "xx"]).fails("r (row-major) or c (column-major)"),
        recommend("--dtype banana", &["--dtype", "banana"]).fails("accepted: f16, bf16"),
        recommend("--format yaml", &["--format", "yaml"]).fails("possible values: table, json"),
        run("unknown subcommand", &["frobnicate"]).fails("unrecognized subcommand 'frobnicate'"),
        run("recommend without a shape", &["recommend"])
            .fails("required arguments were not provided"),
        // Shapes files that are not files of shapes.
        run(
            "--shapes /dev/null",
            &["recommend", "--shapes", "/dev/null"],
        )
        .fails("lists no shapes"),
        run(
            "--shapes on a directory",
            &["recommend", "--shapes", &shapes_dir],
        )
        .fails("Is a directory"),
        run("--shapes missing", &["recommend", "--shapes", &missing]).fails("does-not-exist"),
        // A closed stdout (`carver ... | head -c 0`).
        recommend("recommend, stdout closed", &["--topk", "1024"])
            .stdout_closed()
            .no_panic(),
        recommend(
            "recommend --format json, stdout closed",
            &["--format", "json", "--explain"],
        )
        .stdout_closed()
        .no_panic(),
        run("arch list, stdout closed", &["arch", "list"])
            .stdout_closed()
            .no_panic(),
        // No GPU.
        run(
            "tune without a GPU",
            &["tune", "--m", "64", "--n", "64", "--k", "64"],
        )
        .fails("no CUDA driver")
        .needs(Needs::NoGpu),
        run(
            "bench without a GPU",
            &["bench", "--m", "64", "--n", "64", "--k", "64"],
        )
        .fails("no CUDA driver")
        .needs(Needs::NoGpu),
        run("arch detect without a GPU", &["arch", "detect"])
            .fails("no CUDA driver")
            .needs(Needs::NoGpu),
        recommend("--arch auto without a GPU", &["--arch", "auto"])
            .fails("no CUDA driver")
            .needs(Needs::NoGpu),
    ]
}

/// What one run did.
struct Outcome {
    /// `None` when it was killed at the time limit.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    /// What it left in its working directory (carver writes only to the cache directory).
    wrote_to_cwd: Vec<String>,
}

fn execute(case: &Case, fx: &Fixtures) -> Outcome {
    let mut cmd = Command::new(carver_bin());
    // Nothing from the caller's environment, and nothing written outside the fixtures.
    cmd.env_remove("CARVER_CACHE_DIR")
        .env_remove("CARVER_HARDWARE_DB")
        .env("HOME", fx.path("home"))
        .env("XDG_CACHE_HOME", fx.path("xdg"))
        .env_remove("RUST_BACKTRACE");
    let sets_cache = case.args.iter().any(|a| a == "--cache-dir")
        || case.env.iter().any(|(n, _)| *n == "CARVER_CACHE_DIR");
    if !sets_cache {
        cmd.arg("--cache-dir").arg(fx.path("cache"));
    }
    cmd.args(&case.args);
    for (name, value) in &case.env {
        cmd.env(name, value);
    }
    cmd.current_dir(fx.path("cwd"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("carver starts");
    let stdout = child.stdout.take().unwrap();
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let out = if case.close_stdout {
        drop(stdout);
        None
    } else {
        Some(reader(Box::new(stdout)))
    };
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Outcome {
        status,
        stdout: out.map(|t| text(&t.join().unwrap())).unwrap_or_default(),
        stderr: text(&err.join().unwrap()),
        wrote_to_cwd: empty_out(&fx.root.path().join("cwd")),
    }
}

/// Names what is in `dir` and removes it, so that the next case starts clean.
fn empty_out(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        names.push(format!("{:?}", path.file_name().unwrap_or_default()));
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    names
}

/// Whether the case behaved, and if not, why.
fn judge(case: &Case, o: &Outcome) -> Result<(), String> {
    let Some(status) = o.status else {
        return Err(format!("still running after {LIMIT:?}"));
    };
    if o.stderr.contains("panicked") || o.stderr.contains("RUST_BACKTRACE") {
        return Err(format!("panicked: {}", o.stderr));
    }
    if !o.wrote_to_cwd.is_empty() {
        return Err(format!(
            "wrote {:?} to the working directory",
            o.wrote_to_cwd
        ));
    }
    match case.expect {
        Expect::NoPanic => Ok(()),
        Expect::Success(_) if !status.success() => Err(format!("failed ({status}): {}", o.stderr)),
        Expect::Success(needle) if !o.stdout.contains(needle) => {
            Err(format!("no `{needle}` in: {}", o.stdout))
        }
        Expect::Success(_) => Ok(()),
        Expect::Failure(_) if status.success() => Err(format!("succeeded: {}", o.stdout)),
        Expect::Failure(needle) if !o.stderr.contains(needle) => {
            Err(format!("no `{needle}` in: {}", o.stderr))
        }
        Expect::Failure(_) if !o.stderr.starts_with("error: ") => {
            Err(format!("no `error: ` first: {}", o.stderr))
        }
        // An error type that prints its source inside its message, and again as the cause.
        Expect::Failure(_) if o.stderr.matches("(os error").count() > 1 => {
            Err(format!("a cause printed twice: {}", o.stderr))
        }
        Expect::Failure(_) => Ok(()),
    }
}

fn gpu_present(fx: &Fixtures) -> bool {
    let probe = run("probe", &["arch", "detect"]);
    execute(&probe, fx).status.is_some_and(|s| s.success())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn every_bad_input_fails_cleanly_and_every_fine_one_succeeds() {
    let fx = Fixtures::new();
    let gpu = gpu_present(&fx);
    let root = is_root();
    let cases = cases(&fx);
    let (mut passed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for case in &cases {
        let skip = match case.needs {
            Needs::NoGpu if gpu => Some("this machine has a working GPU"),
            Needs::NotRoot if root => Some("running as root, which reads any directory"),
            _ => None,
        };
        if let Some(why) = skip {
            eprintln!("SKIP  {}: {why}", case.name);
            skipped += 1;
            continue;
        }
        let outcome = execute(case, &fx);
        let status = outcome
            .status
            .map_or_else(|| "timed out".to_string(), |s| s.to_string());
        match judge(case, &outcome) {
            Ok(()) => {
                let said = outcome.stderr.lines().next().unwrap_or("");
                eprintln!("ok    {} ({status}) {said}", case.name);
                passed += 1;
            }
            Err(why) => {
                eprintln!("FAIL  {} ({status}): {why}", case.name);
                failures.push(format!("{}: {why}", case.name));
            }
        }
    }
    eprintln!(
        "{} cases: {passed} behaved, {} did not, {skipped} skipped",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_harness_notices_a_case_that_misbehaves() {
    let fx = Fixtures::new();
    // A good input expected to fail, and a bad one expected to succeed, are both reported.
    let wrong_way = [
        recommend("fine input", &[]).fails("anything"),
        recommend("bad input", &["--topk", "0"]),
        recommend("wrong message", &["--topk", "0"]).fails("a message carver does not print"),
    ];
    for case in &wrong_way {
        assert!(judge(case, &execute(case, &fx)).is_err(), "{}", case.name);
    }
}
