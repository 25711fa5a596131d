//! A fast walk over the top level of a plan document.
//!
//! serde_json reading from an `io::Read` goes byte by byte and costs most of the
//! time on large plans, while parsing from a slice is several times faster but
//! would need the whole document in memory. This scanner gets both: it reads
//! chunks, skips the large sections the guard never looks at (`planned_values`,
//! `prior_state`, ...) by tracking only strings and brackets, and hands each
//! element of `resource_changes` and `resource_drift` (a few kilobytes each) to
//! serde_json as a slice. Memory stays at one element plus one chunk.

use crate::error::PlanError;
use serde::de::{DeserializeOwned, DeserializeSeed};
use std::io::Read;
use std::marker::PhantomData;

const CHUNK: usize = 256 * 1024;

pub(crate) struct Scanner<R> {
    reader: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    line: usize,
    col: usize,
}

/// Where a value started, to turn positions inside it into document positions.
#[derive(Clone, Copy)]
pub(crate) struct Start {
    line: usize,
    col: usize,
}

impl Start {
    pub(crate) fn line(self) -> usize {
        self.line
    }

    /// 1-based, like serde_json's columns.
    pub(crate) fn column(self) -> usize {
        self.col + 1
    }
}

impl<R: Read> Scanner<R> {
    pub(crate) fn new(reader: R) -> Self {
        Scanner {
            reader,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            line: 1,
            col: 0,
        }
    }

    fn fill(&mut self) -> Result<bool, PlanError> {
        if self.pos < self.len {
            return Ok(true);
        }
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => {
                    self.pos = 0;
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(PlanError::Read(e)),
            }
        }
    }

    fn position(&self) -> String {
        format!("at line {} column {}", self.line, self.col + 1)
    }

    pub(crate) fn start(&self) -> Start {
        Start {
            line: self.line,
            col: self.col,
        }
    }

    /// Moves past `n` bytes of the current chunk, keeping line and column.
    fn consume(&mut self, n: usize, capture: Option<&mut Vec<u8>>) {
        let bytes = &self.buf[self.pos..self.pos + n];
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                self.line += bytes.iter().filter(|&&b| b == b'\n').count();
                self.col = n - last - 1;
            }
            None => self.col += n,
        }
        if let Some(out) = capture {
            out.extend_from_slice(bytes);
        }
        self.pos += n;
    }

    /// The next byte that is not white space, without consuming it.
    pub(crate) fn peek_non_ws(&mut self) -> Result<Option<u8>, PlanError> {
        loop {
            if !self.fill()? {
                return Ok(None);
            }
            let chunk = &self.buf[self.pos..self.len];
            match chunk
                .iter()
                .position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
            {
                Some(i) => {
                    self.consume(i, None);
                    return Ok(Some(self.buf[self.pos]));
                }
                None => {
                    let n = chunk.len();
                    self.consume(n, None);
                }
            }
        }
    }

    /// Consumes `expected` after optional white space.
    pub(crate) fn expect(&mut self, expected: u8, what: &str) -> Result<(), PlanError> {
        match self.peek_non_ws()? {
            Some(b) if b == expected => {
                self.consume(1, None);
                Ok(())
            }
            Some(_) => Err(PlanError::NotJson(format!(
                "expected {what} {}",
                self.position()
            ))),
            None => Err(self.eof()),
        }
    }

    /// Consumes `b` if it is next (after white space).
    pub(crate) fn accept(&mut self, b: u8) -> Result<bool, PlanError> {
        if self.peek_non_ws()? == Some(b) {
            self.consume(1, None);
            return Ok(true);
        }
        Ok(false)
    }

    pub(crate) fn eof(&self) -> PlanError {
        PlanError::Truncated(format!("EOF while parsing a value {}", self.position()))
    }

    fn syntax(&self, what: &str) -> PlanError {
        PlanError::NotJson(format!("{what} {}", self.position()))
    }

    /// Walks one complete JSON value, copying its bytes into `capture` if given.
    /// Strings, brackets and the characters allowed outside strings are checked;
    /// a captured value is parsed by serde_json afterwards, which checks the rest.
    pub(crate) fn value(&mut self, mut capture: Option<&mut Vec<u8>>) -> Result<(), PlanError> {
        let Some(first) = self.peek_non_ws()? else {
            return Err(self.eof());
        };
        if !matches!(
            first,
            b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
        ) {
            return Err(self.syntax("expected value"));
        }
        if !matches!(first, b'{' | b'[' | b'"') {
            // A number or a literal: it ends at the first delimiter.
            loop {
                if !self.fill()? {
                    return Ok(());
                }
                let chunk = &self.buf[self.pos..self.len];
                let end = chunk
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')));
                match end {
                    Some(i) => {
                        self.consume(i, capture.as_deref_mut());
                        return Ok(());
                    }
                    None => {
                        let n = chunk.len();
                        self.consume(n, capture.as_deref_mut());
                    }
                }
            }
        }
        let mut closers: Vec<u8> = Vec::new();
        let mut in_string = false;
        let mut escaped = false;
        loop {
            if !self.fill()? {
                return Err(self.eof());
            }
            let chunk = &self.buf[self.pos..self.len];
            let mut done = false;
            let mut bad: Option<&'static str> = None;
            let mut i = 0;
            while i < chunk.len() {
                let c = chunk[i];
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if c == b'\\' {
                        escaped = true;
                    } else if c == b'"' {
                        in_string = false;
                    } else if c < 0x20 {
                        bad = Some("control character in a string");
                        break;
                    }
                } else {
                    match c {
                        b'"' => in_string = true,
                        b'{' => closers.push(b'}'),
                        b'[' => closers.push(b']'),
                        b'}' | b']' => {
                            if closers.pop() != Some(c) {
                                bad = Some("mismatched bracket");
                                break;
                            }
                        }
                        b' ' | b'\n' | b'\r' | b'\t' | b',' | b':' | b'+' | b'-' | b'.' => {}
                        c if c.is_ascii_alphanumeric() => {}
                        _ => {
                            bad = Some("unexpected character");
                            break;
                        }
                    }
                }
                i += 1;
                if !in_string && closers.is_empty() {
                    done = true;
                    break;
                }
            }
            self.consume(i, capture.as_deref_mut());
            if let Some(what) = bad {
                return Err(self.syntax(what));
            }
            if done {
                return Ok(());
            }
        }
    }

    /// Captures one value and deserialises it from memory.
    pub(crate) fn parse<T: DeserializeOwned>(
        &mut self,
        scratch: &mut Vec<u8>,
    ) -> Result<T, PlanError> {
        self.parse_seed(scratch, PhantomData)
    }

    /// Like [`Scanner::parse`], with a seed that carries what the value's
    /// reading needs from earlier in the document.
    pub(crate) fn parse_seed<T, S>(
        &mut self,
        scratch: &mut Vec<u8>,
        seed: S,
    ) -> Result<T, PlanError>
    where
        S: for<'de> DeserializeSeed<'de, Value = T>,
    {
        self.peek_non_ws()?;
        let start = self.start();
        scratch.clear();
        self.value(Some(scratch))?;
        let mut de = serde_json::Deserializer::from_slice(scratch);
        let value = seed.deserialize(&mut de).map_err(|e| relocate(e, start))?;
        de.end().map_err(|e| relocate(e, start))?;
        Ok(value)
    }
}

/// Maps a serde_json error inside a captured value to the document's position.
fn relocate(e: serde_json::Error, start: Start) -> PlanError {
    use serde_json::error::Category;
    let line = start.line + e.line().saturating_sub(1);
    let col = if e.line() <= 1 {
        start.col + e.column()
    } else {
        e.column()
    };
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let message = format!("{message} at line {line} column {col}");
    match e.classify() {
        Category::Io => PlanError::Read(std::io::Error::other(message)),
        Category::Eof => PlanError::Truncated(message),
        Category::Syntax => PlanError::NotJson(message),
        Category::Data => PlanError::NotAPlan(message),
    }
}
