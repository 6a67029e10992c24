//! What a package ships beside the binary (docs/packaging.md): the systemd unit verified and
//! scored by systemd itself, completions and manual pages generated from the CLI, and the Debian
//! package `scripts/test` builds (`scripts/package-deb --profile dev`), listed and, as root,
//! installed, started as its `sluice` user and purged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice_testkit::external;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
    output
}

/// Every command of `sluice --help`, the contract the completions and pages must cover.
const COMMANDS: &[&str] = &[
    "serve",
    "check",
    "reload",
    "file-server",
    "origin",
    "cert",
    "reverse-proxy",
    "demo",
    "bench",
    "precompress",
    "import",
    "completions",
    "man",
];

#[test]
fn the_help_lists_exactly_the_documented_commands() {
    let help = text(&run(sluice().arg("--help")).stdout);
    let listed: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert_eq!(listed, COMMANDS);
}

#[test]
fn the_systemd_unit_verifies_and_is_hardened() {
    let Some(analyze) = external::require("systemd-analyze", "apt-get install systemd") else {
        return;
    };
    // The unit names /usr/bin/sluice and /etc/sluice/sluice.toml, which `verify` requires to
    // exist: check a copy that names the binary cargo built and a copy of the package's default
    // configuration whose directories (/run/sluice, /var/www/html: the package makes them) are
    // in a temporary directory. That configuration must pass `sluice check`.
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(repo().join("examples/systemd/sluice.service")).unwrap();
    assert!(unit.contains("ExecReload=/usr/bin/sluice reload"));
    assert!(unit.contains("AmbientCapabilities=CAP_NET_BIND_SERVICE"));
    let run_dir = dir.path().join("run");
    let www = dir.path().join("www");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::create_dir_all(&www).unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(repo().join("examples/systemd/sluice.toml"))
            .unwrap()
            .replace("/run/sluice", run_dir.to_str().unwrap())
            .replace("/var/www/html", www.to_str().unwrap()),
    )
    .unwrap();
    run(sluice().arg("check").arg(&config));
    let copy = dir.path().join("sluice.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/sluice", env!("CARGO_BIN_EXE_sluice"))
            .replace("/etc/sluice/sluice.toml", config.to_str().unwrap()),
    )
    .unwrap();

    // `--man=no`: the Documentation= page is installed by the package, not on this machine.
    let verify = Command::new(&analyze)
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty() && verify.stdout.is_empty(),
        "systemd-analyze verify: {}\n{}{}",
        verify.status,
        text(&verify.stdout),
        text(&verify.stderr)
    );

    // systemd's own exposure score, 0 (locked down) to 10 (root, unsandboxed): at most 2.0,
    // its "OK" band (it fails the command above the threshold, in tenths).
    let security = Command::new(&analyze)
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&copy)
        .output()
        .unwrap();
    let report = text(&security.stdout) + &text(&security.stderr);
    assert!(security.status.success(), "{report}");
    let overall = report
        .lines()
        .find(|line| line.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall exposure level in:\n{report}"));
    assert!(overall.contains(" OK"), "{overall}");
}

#[test]
fn completions_cover_every_command_and_bash_parses_them() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = text(&run(sluice().args(["completions", shell])).stdout);
        for command in COMMANDS {
            assert!(
                script.contains(command),
                "{shell} completions lack `{command}`"
            );
        }
        // A flag of a nested command, so nested commands are there too (fish spells it `-l
        // config`).
        assert!(
            script.contains("--config") || script.contains("-l config"),
            "{shell}: no --config"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("sluice.bash");
    std::fs::write(&bash, run(sluice().args(["completions", "bash"])).stdout).unwrap();
    run(Command::new("bash").arg("-n").arg(&bash));

    // An unknown shell: exit 2 and the shells it knows.
    let out = sluice().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("tcsh") && err.contains("bash") && err.contains("fish"),
        "{err}"
    );
}

#[test]
fn man_prints_sluice_1_and_writes_a_page_per_command() {
    let page = text(&run(sluice().arg("man")).stdout);
    assert!(page.contains(".TH sluice 1"), "{page}");
    assert!(
        page.contains(env!("CARGO_PKG_VERSION")),
        "no version in the page"
    );
    for command in COMMANDS {
        // troff escapes the hyphens: sluice\-file\-server(1).
        let reference = format!("sluice\\-{}(1)", command.replace('-', "\\-"));
        assert!(
            page.contains(&reference),
            "sluice.1 does not name {reference}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let listed = text(&run(sluice().arg("man").arg("--out-dir").arg(&out)).stdout);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(listed.lines().count(), names.len());
    assert!(names.contains(&"sluice.1".to_owned()));
    for command in COMMANDS {
        assert!(
            names.contains(&format!("sluice-{command}.1")),
            "no sluice-{command}.1 in {names:?}"
        );
    }
    // Nested commands get their own page, titled and invoked by their full name.
    let run_page = std::fs::read_to_string(out.join("sluice-bench-run.1")).unwrap();
    assert!(run_page.contains(".TH sluice-bench-run 1"), "{run_page}");
    assert!(run_page.contains("sluice bench run"), "{run_page}");

    // groff renders every page without a warning (what `man` would run).
    if let Some(groff) = external::find("groff") {
        for name in &names {
            let rendered = run(Command::new(&groff)
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .arg(out.join(name)));
            assert!(
                rendered.stderr.is_empty(),
                "{name}: {}",
                text(&rendered.stderr)
            );
        }
    }
}

/// The files the package must carry, as `dpkg-deb -c` lists them.
const PACKAGED: &[&str] = &[
    "./usr/bin/sluice",
    "./etc/sluice/sluice.toml",
    "/systemd/system/sluice.service",
    "./usr/share/man/man1/sluice.1",
    "./usr/share/man/man1/sluice-serve.1",
    "./usr/share/bash-completion/completions/sluice",
    "./usr/share/zsh/vendor-completions/_sluice",
    "./usr/share/fish/vendor_completions.d/sluice.fish",
    "./usr/share/doc/sluice/sluice.toml",
    "./usr/lib/tmpfiles.d/sluice.conf",
    "./usr/share/sluice/index.html",
];

#[tokio::test]
async fn the_debian_package_installs_serves_as_its_user_and_purges() {
    let Some(deb) = external::require_file("SLUICE_DEB", "scripts/package-deb --profile dev")
    else {
        return;
    };
    let Some(dpkg_deb) = external::require("dpkg-deb", "apt-get install dpkg") else {
        return;
    };
    let listing = text(&run(Command::new(&dpkg_deb).arg("-c").arg(&deb)).stdout);
    for file in PACKAGED {
        assert!(
            listing.contains(file),
            "{file} is not in the package:\n{listing}"
        );
    }
    let control = text(&run(Command::new(&dpkg_deb).args(["-f"]).arg(&deb)).stdout);
    assert!(control.contains("Package: sluice"), "{control}");
    assert!(
        control.contains("adduser"),
        "Depends lacks adduser:\n{control}"
    );

    // Installing changes the machine: only as root (CI's container is), and only with the
    // package scripts/test built for this run.
    if !running_as_root() {
        let dir = tempfile::tempdir().unwrap();
        run(Command::new(&dpkg_deb).arg("-x").arg(&deb).arg(dir.path()));
        let version = run(Command::new(dir.path().join("usr/bin/sluice")).arg("--version"));
        assert!(text(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
        eprintln!("not root: the package was unpacked and run, not installed with dpkg -i");
        return;
    }
    let installed = Installed::new(&deb);

    let user = text(&run(Command::new("getent").args(["passwd", "sluice"])).stdout);
    assert!(user.trim_end().ends_with("/usr/sbin/nologin"), "{user}");
    let version = run(Command::new("/usr/bin/sluice").arg("--version"));
    assert!(text(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    run(Command::new("/usr/bin/sluice").args(["check", "/etc/sluice/sluice.toml"]));

    // The installed binary, as the sluice user, serves the welcome page postinst put in the
    // default configuration's root (on a free port: port 80 may be taken on this machine).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\n\
         static = { root = \"/var/www/html\", index = [\"index.sluice-debian.html\"] }\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // setpriv execs sluice as that user (runuser would fork and keep the SIGTERM to itself).
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=sluice", "--regid=sluice", "--init-groups", "--"])
        .args(["/usr/bin/sluice", "serve", "-c"])
        .arg(&config);
    let serving = crate::reload::Serving::spawn(command);
    let body = sluice_testkit::client(sluice_testkit::Offer::Http1)
        .get(format!("http://{}/", serving.addr()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("sluice is serving"), "{body}");
    assert!(
        serving.stop(),
        "the packaged sluice did not stop cleanly on SIGTERM"
    );

    installed.purge();
    assert!(!Path::new("/usr/bin/sluice").exists());
    assert!(!Path::new("/var/www/html/index.sluice-debian.html").exists());
    let gone = Command::new("getent")
        .args(["passwd", "sluice"])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "purge left the sluice user");
}

/// The package installed by `dpkg -i`; purged when dropped, even when an assertion failed.
struct Installed {
    purged: bool,
}

impl Installed {
    fn new(deb: &Path) -> Self {
        let installed = Self { purged: false };
        run(Command::new("dpkg").arg("-i").arg(deb));
        installed
    }

    fn purge(mut self) {
        self.purged = true;
        run(Command::new("dpkg").args(["--purge", "sluice"]));
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !self.purged {
            let _ = Command::new("dpkg").args(["--purge", "sluice"]).output();
        }
    }
}

/// Whether this process runs as root (the owner of /proc/self is the process's user).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}
