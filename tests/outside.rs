//! A crate outside the workspace (`tests/outside/`), depending only on phaseo-agent, serde,
//! schemars and tokio as a user's would, builds a method tool set with resources and passes its
//! own tests. Run as a separate cargo build, so none of this workspace's features leak into it.

use std::process::Command;

#[test]
fn a_crate_outside_the_workspace_builds_a_method_tool_set_with_resources() {
    let root = env!("CARGO_MANIFEST_DIR");
    let target = format!("{}/outside", env!("CARGO_TARGET_TMPDIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["test", "--quiet", "--manifest-path"])
        .arg(format!("{root}/outside/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the outside crate failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("2 passed"), "{stdout}");
}
