//! `boyd models list | pull NAME [--force] | verify [NAME]`: the catalog and the model store.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::Subcommand;
use serde::Serialize;

use super::GlobalOpts;
use crate::catalog::{self, Catalog, FetchOptions, ResolvedFrom, Store};
use crate::sizer;
use crate::store::VerifyStatus;
use crate::units::Bytes;

/// Arguments of `boyd models`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with the catalog.
    #[command(subcommand)]
    pub command: ModelsCommand,
}

/// `boyd models` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List catalog models: name, architecture, parameters, quantization, file size, licence,
    /// whether the file is in the store, and whether it runs here (the sizing model's fit check
    /// against this machine's free memory; `--device` picks the GPU). `--json` for all fields.
    List,
    /// Fetch a model into the store (hub cache, hub, then the alternative source) and verify it.
    Pull {
        /// Catalog name (see `boyd models list`).
        name: String,
        /// Discard the stored file and fetch it again.
        #[arg(long)]
        force: bool,
    },
    /// Rehash stored files against the catalog (all downloaded models, or NAME); exits 1 on a
    /// mismatch.
    Verify {
        /// Catalog name; all entries when absent.
        name: Option<String>,
    },
}

/// Run `boyd models ...`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let store = Store::from_env()?;
    let catalog = Catalog::load_from(Some(&store.models_dir()))?;
    match args.command {
        ModelsCommand::List => list(&catalog, &store, g),
        ModelsCommand::Pull { name, force } => pull(&catalog, &store, &name, force, g.json),
        ModelsCommand::Verify { name } => verify(&catalog, &store, name.as_deref(), g.json),
    }
}

fn list(catalog: &Catalog, store: &Store, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    // This machine as the sizing model sees it (the GPU `--device` names, else the host's free
    // RAM); when it cannot be read the list still prints, without the fit column.
    let hw = match sizer::hardware("this", &g.device, None) {
        Ok(hw) => Some(hw),
        Err(e) => {
            tracing::warn!("cannot size this machine: {e:#}");
            None
        }
    };
    let rows = catalog::list_models_on(catalog, store, hw.as_ref(), catalog::LIST_CTX);
    if g.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let table: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.architecture.to_string(),
                human_params(r.params),
                r.quant.clone(),
                r.size.map_or_else(|| "-".into(), |s| s.to_string()),
                r.license.clone(),
                match r.downloaded {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "- (sizing only)".into(),
                },
                runs_here(r.fit.as_ref()),
            ]
        })
        .collect();
    print_table(
        &[
            "NAME",
            "ARCH",
            "PARAMS",
            "QUANT",
            "SIZE",
            "LICENSE",
            "DOWNLOADED",
            "RUNS HERE",
        ],
        &table,
    );
    match &hw {
        Some(hw) => println!(
            "\nRUNS HERE: the sizing model's fit check at {} tokens of context (capped at each \
             model's own) against {} free on {} ({}); `boyd size NAME` for the detail.",
            catalog::LIST_CTX,
            hw.free,
            hw.description,
            hw.backend
        ),
        None => println!("\nRUNS HERE: ? (this machine could not be sized; see the log)"),
    }
    println!("store: {}", store.models_dir().display());
    Ok(ExitCode::SUCCESS)
}

/// The RUNS HERE cell: `yes (needs X)`, `no: needs X, Y free`, or why the decoder cannot.
fn runs_here(fit: Option<&catalog::Fit>) -> String {
    match fit {
        None => "?".into(),
        Some(f) if !f.fits => format!("no: needs {}, {} free", f.needs, f.free),
        Some(f) if !f.runnable => format!("fits ({}), decoder: sizing only", f.needs),
        Some(f) => format!("yes ({})", f.needs),
    }
}

#[derive(Serialize)]
struct PullReport {
    name: String,
    path: std::path::PathBuf,
    from: ResolvedFrom,
    size: Bytes,
    seconds: f64,
}

fn pull(
    catalog: &Catalog,
    store: &Store,
    name: &str,
    force: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let entry = catalog.require(name)?;
    let opts = FetchOptions {
        force,
        progress: !json,
        ..FetchOptions::from_env()
    };
    let start = Instant::now();
    let fetched = store
        .ensure(entry, &opts)
        .with_context(|| format!("pulling {name}"))?;
    let report = PullReport {
        name: name.to_owned(),
        size: Bytes(entry.source.as_ref().map_or(0, |s| s.size)),
        path: fetched.path,
        from: fetched.from,
        seconds: start.elapsed().as_secs_f64(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.from == ResolvedFrom::Store {
        println!(
            "{name}: already in the store, verified ({})\n{}",
            report.size,
            report.path.display()
        );
    } else {
        println!(
            "{name}: fetched from {} and verified, {} in {:.1} s\n{}",
            report.from,
            report.size,
            report.seconds,
            report.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct VerifyRow {
    name: String,
    path: Option<std::path::PathBuf>,
    #[serde(flatten)]
    status: VerifyStatus,
}

fn verify(
    catalog: &Catalog,
    store: &Store,
    name: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let entries: Vec<_> = match name {
        Some(n) => vec![catalog.require(n)?],
        None => catalog.entries().filter(|e| e.source.is_some()).collect(),
    };
    let mut rows = Vec::new();
    for entry in entries {
        let status = store.verify_entry(entry, !json)?;
        rows.push(VerifyRow {
            name: entry.name.clone(),
            path: store.entry_path(entry),
            status,
        });
    }
    let failed = rows.iter().any(|r| {
        r.status.is_mismatch()
            || (name.is_some() && matches!(r.status, VerifyStatus::Missing | VerifyStatus::NoFile))
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        for r in &rows {
            let path = r
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            match &r.status {
                VerifyStatus::Ok => println!("OK        {}  {path}", r.name),
                VerifyStatus::Missing => println!("missing   {}  (boyd models pull {})", r.name, r.name),
                VerifyStatus::NoFile => println!("no file   {}  (sizing-only entry)", r.name),
                VerifyStatus::Mismatch { expected, actual } => println!(
                    "MISMATCH  {}  {path}\n          expected sha256 {expected}\n          actual   sha256 {actual}\n          fix: boyd models pull {} --force",
                    r.name, r.name
                ),
                VerifyStatus::SizeMismatch { expected, actual } => println!(
                    "MISMATCH  {}  {path}\n          expected {expected} bytes, found {actual}\n          fix: boyd models pull {} --force",
                    r.name, r.name
                ),
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `134.5M`, `7.24B`.
fn human_params(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2}B", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1}M", n / 1e6)
    } else {
        format!("{n}")
    }
}

fn print_table<const N: usize>(header: &[&str], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", text.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
