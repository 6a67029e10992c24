//! `sluice cert`: a development CA and a certificate for some host names.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_server::net::cert;
use sluice_server::ops::lifecycle::fail;

#[derive(Args)]
pub struct CertArgs {
    /// Host names or IP addresses the certificate is for (repeatable).
    #[arg(long = "host", value_name = "NAME", default_values_t = cert::DEFAULT_HOSTS.map(String::from))]
    pub hosts: Vec<String>,
    /// Directory to write ca.pem, cert.pem and key.pem into.
    #[arg(long, default_value = "certs")]
    pub out: PathBuf,
}

pub fn write(args: &CertArgs) -> ExitCode {
    let dev = match cert::generate(&args.hosts) {
        Ok(dev) => dev,
        Err(e) => return fail(&format!("making the certificate: {e}")),
    };
    let files = match cert::write_files(&dev, &args.out) {
        Ok(files) => files,
        Err(e) => return fail(&format!("writing into {}: {e}", args.out.display())),
    };
    println!(
        "wrote a development CA and a certificate for {}:",
        args.hosts.join(", ")
    );
    println!("  CA certificate:  {}", files.ca_cert.display());
    println!(
        "  certificate:     {}  (leaf + CA chain)",
        files.cert.display()
    );
    println!("  private key:     {}", files.key.display());
    println!();
    println!("use them in a listener:");
    println!(
        "  [listeners.tls]\n  cert = \"{}\"\n  key = \"{}\"",
        files.cert.display(),
        files.key.display()
    );
    println!();
    println!("trust the CA:");
    println!(
        "  curl:    curl --cacert {} https://localhost:8443/",
        files.ca_cert.display()
    );
    println!(
        "  Debian:  sudo cp {} /usr/local/share/ca-certificates/sluice-dev.crt && sudo update-ca-certificates",
        files.ca_cert.display()
    );
    println!(
        "  browser: import {} as a trusted authority (Firefox: Settings > Certificates)",
        files.ca_cert.display()
    );
    ExitCode::SUCCESS
}
