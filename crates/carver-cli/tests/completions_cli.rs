//! `carver completions SHELL`: a script for each shell clap_complete supports.

mod common;
use common::{carver, text};

#[test]
fn every_shell_gets_a_script_that_completes_the_subcommands() {
    let cache = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = carver(cache.path(), &["completions", shell])
            .output()
            .unwrap();
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{shell}: {stderr}");
        assert!(
            stdout.contains("recommend") && stdout.contains("carver"),
            "{shell} script:\n{stdout}"
        );
        assert!(stderr.is_empty(), "{shell}: {stderr}");
    }
}

#[test]
fn an_unknown_shell_is_refused_with_the_known_ones() {
    let cache = tempfile::tempdir().unwrap();
    let out = carver(cache.path(), &["completions", "tcsh"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("invalid value 'tcsh'") && stderr.contains("bash, elvish, fish"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_missing_shell_is_a_usage_error() {
    let cache = tempfile::tempdir().unwrap();
    let out = carver(cache.path(), &["completions"]).output().unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("<SHELL>"), "{stderr}");
}
