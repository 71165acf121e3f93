//! The checker protocol: a crash image is materialized into a temporary directory and a
//! checker decides whether what is there is consistent with the marks written before the
//! crash. [`CommandChecker`] runs a shell command with `IMAGE_DIR`, `MARKS_FILE` and
//! `CRASH_POINT` in its environment: exit 0 = consistent, anything else = a violation whose
//! text is the command's standard output.

use crate::error::io;
use crate::Error;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::FaultFs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a checker says about one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The image keeps every promise.
    Consistent,
    /// It does not: the checker's explanation.
    Violation(String),
}

/// Decides one crash image. Implementations are called from several threads at once.
pub trait Checker: Sync {
    /// `image` holds the crash image (the checked directory as the crash left it); `marks`
    /// is a file with one mark per line, those written before the crash point.
    fn check(&self, image: &Path, marks: &Path, crash_point: usize) -> Result<Verdict, Error>;

    /// Decides an image held in memory, with the marks written before the crash. The default
    /// materializes both into a fresh temporary directory and calls [`Checker::check`]; a
    /// checker that can read the image where it is overrides this (no copy to disk).
    fn check_in_memory(
        &self,
        image: &FaultFs,
        marks: &[String],
        crash_point: usize,
    ) -> Result<Verdict, Error> {
        check_on_disk(self, image, marks, crash_point)
    }
}

/// A shell command as the checker (`sh -c CMD`).
#[derive(Clone, Debug)]
pub struct CommandChecker {
    /// The command.
    pub cmd: String,
    /// A checker running longer is killed and the image counted as a violation ("checker
    /// timed out": a recovery that hangs is not consistent). Default 120 s.
    pub timeout: Duration,
}

impl CommandChecker {
    /// `cmd` with the default timeout.
    pub fn new(cmd: impl Into<String>) -> Self {
        CommandChecker {
            cmd: cmd.into(),
            timeout: Duration::from_secs(120),
        }
    }
}

impl Checker for CommandChecker {
    fn check(&self, image: &Path, marks: &Path, crash_point: usize) -> Result<Verdict, Error> {
        // output goes to files, not pipes: a server the checker leaves running in the
        // background would hold a pipe open forever
        let out_dir = tempfile::tempdir().map_err(|e| io("a temporary directory", e))?;
        let (out_p, err_p) = (out_dir.path().join("stdout"), out_dir.path().join("stderr"));
        let file = |p: &PathBuf| std::fs::File::create(p).map_err(|e| io(p.display(), e));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.cmd)
            .env("IMAGE_DIR", image)
            .env("MARKS_FILE", marks)
            .env("CRASH_POINT", crash_point.to_string())
            .stdin(Stdio::null())
            .stdout(file(&out_p)?)
            .stderr(file(&err_p)?)
            .spawn()
            .map_err(|e| Error::Checker(format!("cannot start sh -c {:?}: {e}", self.cmd)))?;
        let start = Instant::now();
        let status = loop {
            match child
                .try_wait()
                .map_err(|e| io("waiting for the checker", e))?
            {
                Some(s) => break Some(s),
                None if start.elapsed() > self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        };
        let read = |p: &PathBuf| {
            String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default())
                .trim()
                .to_string()
        };
        let Some(status) = status else {
            return Ok(Verdict::Violation(format!(
                "checker timed out after {:?}",
                self.timeout
            )));
        };
        match status.code() {
            Some(0) => Ok(Verdict::Consistent),
            Some(c @ (126 | 127)) => Err(Error::Checker(format!(
                "sh -c {:?} exited {c}: {}",
                self.cmd,
                read(&err_p)
            ))),
            code => {
                let out = read(&out_p);
                Ok(Verdict::Violation(if out.is_empty() {
                    format!(
                        "checker failed ({}) without a message; stderr: {}",
                        code.map_or("killed".into(), |c| format!("exit {c}")),
                        read(&err_p)
                    )
                } else {
                    out
                }))
            }
        }
    }
}

/// Writes the live tree of `fs` (a crash image) into the real directory `dir`, which must
/// exist.
pub fn materialize(fs: &FaultFs, dir: &Path) -> Result<(), Error> {
    copy_out(fs, "", dir)
        .map_err(|e| io(format!("materializing an image into {}", dir.display()), e))
}

fn copy_out(fs: &FaultFs, at: &str, dir: &Path) -> std::io::Result<()> {
    for e in fs.read_dir(at)? {
        let p = if at.is_empty() {
            e.name.clone()
        } else {
            format!("{at}/{}", e.name)
        };
        let real = dir.join(&e.name);
        if e.is_dir {
            std::fs::create_dir(&real)?;
            copy_out(fs, &p, &real)?;
        } else {
            let f = fs.open(&p, OpenOptions::read_only())?;
            let mut buf = vec![0; usize::try_from(f.len()?).map_err(std::io::Error::other)?];
            let mut done = 0;
            while done < buf.len() {
                let n = f.read_at(&mut buf[done..], done as u64)?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            std::fs::write(&real, &buf)?;
        }
    }
    Ok(())
}

/// Materializes `image` and its marks into a fresh temporary directory and runs `checker`.
pub fn check_on_disk<C: Checker + ?Sized>(
    checker: &C,
    image: &FaultFs,
    marks: &[String],
    crash_point: usize,
) -> Result<Verdict, Error> {
    let tmp = tempfile::tempdir().map_err(|e| io("a temporary directory", e))?;
    let img = tmp.path().join("image");
    std::fs::create_dir(&img).map_err(|e| io(img.display(), e))?;
    materialize(image, &img)?;
    let marks_file = tmp.path().join("marks");
    let text: String = marks.iter().map(|m| format!("{m}\n")).collect();
    std::fs::write(&marks_file, text).map_err(|e| io(marks_file.display(), e))?;
    checker.check(&img, &marks_file, crash_point)
}

/// Runs `checker` on `image` (in memory if the checker can, else materialized).
pub(crate) fn check_image(
    checker: &dyn Checker,
    image: &FaultFs,
    marks: &[String],
    crash_point: usize,
) -> Result<Verdict, Error> {
    checker.check_in_memory(image, marks, crash_point)
}
