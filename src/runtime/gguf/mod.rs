//! GGUF reading with validation before allocation.
//!
//! This module parses a GGUF header — metadata key/values and the tensor-info table — into plain
//! data, without touching tensor bytes. Every count, length and dimension read from the file is
//! checked against the bytes that remain and against fixed caps *before* anything is allocated,
//! so a hostile file cannot make boyd allocate gigabytes or overflow an offset. Tensor data is
//! checked separately (`GgufHeader::check_data`) once the file length is known, which lets the
//! sizing model read a header from a file truncated right after its tensor table.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::sizing::{ArchError, ArchParams, Architecture, GgmlType, RopeScaling};

mod params;
mod read;
mod value;
mod writer;

use read::eof;
pub use value::{Array, Value};
pub use writer::GgufWriter;

/// `GGUF` in little-endian byte order.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Most elements reserved up front for an array or table whose length comes from the file.
/// Longer ones grow as elements are actually read, so memory follows the bytes consumed,
/// not the count the file claims.
const PREALLOC_CAP: usize = 1 << 12;

/// Default tensor-data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Caps applied while reading a GGUF header; every one is far above what real models use.
#[derive(Debug, Clone, Copy)]
pub struct HeaderLimits {
    /// Most tensors in one file.
    pub max_tensors: u64,
    /// Most metadata key/value pairs.
    pub max_kv: u64,
    /// Longest string (key, value or array element) in bytes.
    pub max_string: u64,
    /// Most elements in one metadata array.
    pub max_array: u64,
    /// Deepest array nesting.
    pub max_depth: u32,
    /// Most dimensions of a tensor (ggml's GGML_MAX_DIMS).
    pub max_dims: u32,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        Self {
            max_tensors: 1 << 16,
            max_kv: 1 << 16,
            max_string: 1 << 24,
            max_array: 1 << 24,
            max_depth: 2,
            max_dims: 4,
        }
    }
}

/// Everything that can be wrong with a GGUF file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// Reading the file failed (other than ending early).
    #[error("reading GGUF: {0}")]
    Io(#[from] std::io::Error),
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: magic bytes are {found:?}, expected \"GGUF\"")]
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// A version this reader does not understand.
    #[error("unsupported GGUF version {0}; boyd reads versions 2 and 3")]
    UnsupportedVersion(u32),
    /// The file ends inside the header.
    #[error("GGUF file is truncated while reading {what} at byte {offset}; the download is probably incomplete (re-fetch it)")]
    Truncated {
        /// What was being read.
        what: String,
        /// Byte offset where the read started.
        offset: u64,
    },
    /// A count exceeds its cap or the bytes that remain.
    #[error("GGUF {what} count {count} is implausible (limit {limit})")]
    TooMany {
        /// What is counted.
        what: &'static str,
        /// The value in the file.
        count: u64,
        /// The limit that applied.
        limit: u64,
    },
    /// A string is not valid UTF-8.
    #[error("GGUF string at byte {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Byte offset of the string.
        offset: u64,
    },
    /// A metadata value type id that GGUF does not define.
    #[error("GGUF metadata key {key:?} has unknown value type {ty}")]
    BadValueType {
        /// The key.
        key: String,
        /// The type id.
        ty: u32,
    },
    /// Arrays nested deeper than allowed.
    #[error("GGUF metadata key {key:?} nests arrays deeper than {limit}")]
    TooDeep {
        /// The key.
        key: String,
        /// The limit.
        limit: u32,
    },
    /// The same metadata key twice.
    #[error("GGUF metadata key {0:?} appears twice")]
    DuplicateKey(String),
    /// The same tensor name twice.
    #[error("GGUF tensor {0:?} appears twice")]
    DuplicateTensor(String),
    /// `general.alignment` is zero or not a power of two.
    #[error("GGUF alignment {0} is not a power of two")]
    BadAlignment(u64),
    /// A tensor with no dimensions or too many.
    #[error("tensor {name:?} has {n_dims} dimensions; GGUF allows 1 to {limit}")]
    BadDimCount {
        /// Tensor name.
        name: String,
        /// Dimensions in the file.
        n_dims: u32,
        /// The limit.
        limit: u32,
    },
    /// A zero or absurd dimension.
    #[error("tensor {name:?} has invalid dimension {dim} (dims {dims:?})")]
    BadDim {
        /// Tensor name.
        name: String,
        /// The offending value.
        dim: u64,
        /// All dims as read.
        dims: Vec<u64>,
    },
    /// The product of dimensions or the byte size overflows.
    #[error("tensor {name:?}: element count or byte size of dims {dims:?} overflows")]
    SizeOverflow {
        /// Tensor name.
        name: String,
        /// Dims as read.
        dims: Vec<u64>,
    },
    /// A GGML type id that boyd does not know.
    #[error("tensor {name:?} has unknown GGML type id {ty}")]
    UnknownType {
        /// Tensor name.
        name: String,
        /// The id.
        ty: u32,
    },
    /// Element count not a multiple of the type's block size.
    #[error("tensor {name:?}: {elems} elements is not a multiple of the {ty} block size")]
    NotBlockMultiple {
        /// Tensor name.
        name: String,
        /// Element count.
        elems: u64,
        /// Type name.
        ty: &'static str,
    },
    /// Row length (`ne[0]`) not a multiple of the type's block size: quantized blocks never
    /// straddle rows, so such a tensor cannot be read row by row.
    #[error("tensor {name:?}: row length {row} is not a multiple of the {ty} block size")]
    RowNotBlockMultiple {
        /// Tensor name.
        name: String,
        /// Row length (`dims[0]`).
        row: u64,
        /// Type name.
        ty: &'static str,
    },
    /// Tensor data offset not aligned.
    #[error("tensor {name:?} offset {offset} is not a multiple of the alignment {alignment}")]
    Unaligned {
        /// Tensor name.
        name: String,
        /// Offset relative to the data section.
        offset: u64,
        /// Alignment.
        alignment: u64,
    },
    /// Tensor data past the end of the file.
    #[error("tensor {name:?} data ends at byte {end}, past the end of the file ({file_len} bytes); the file is truncated")]
    OutOfBounds {
        /// Tensor name.
        name: String,
        /// Absolute end offset.
        end: u64,
        /// File length.
        file_len: u64,
    },
    /// Two tensors share bytes.
    #[error("tensors {first:?} and {second:?} overlap in the data section")]
    Overlap {
        /// Earlier tensor.
        first: String,
        /// Later tensor.
        second: String,
    },
    /// A required metadata key is absent.
    #[error("GGUF metadata lacks required key {0:?}")]
    MissingKey(String),
    /// A metadata key has the wrong type or an out-of-range value.
    #[error("GGUF metadata key {key:?}: expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// What was expected.
        expected: &'static str,
    },
    /// `general.architecture` names a family boyd does not know.
    #[error("unsupported architecture {0:?}; boyd runs llama, mistral, qwen2 and qwen3")]
    UnknownArchitecture(String),
    /// Hyper-parameters that make no sense.
    #[error("invalid hyper-parameters: {0}")]
    BadHyperParams(#[from] ArchError),
    /// A hyper-parameter disagrees with another or with a tensor shape.
    #[error("inconsistent model: {0}")]
    Inconsistent(String),
    /// A tensor the decoder needs is absent.
    #[error("model lacks tensor {0:?}")]
    MissingTensor(String),
}

impl GgufError {
    fn wrong(key: &str, expected: &'static str) -> Self {
        Self::WrongType {
            key: key.to_string(),
            expected,
        }
    }
}

/// One entry of the tensor-info table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// GGML storage type.
    pub ggml_type: GgmlType,
    /// Dimensions in GGUF order (innermost first, `ne[0]` = row length).
    pub dims: Vec<u64>,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elems(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Dims outermost first, as candle and PyTorch order them.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed GGUF header: metadata and tensor infos, no tensor data.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Metadata in key order.
    pub metadata: BTreeMap<String, Value>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// Data-section alignment.
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_start: u64,
}

impl GgufHeader {
    /// Read the header of the file at `path` (metadata and tensor table only).
    pub fn read_path(path: &Path) -> Result<Self, GgufError> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Self::read(
            std::io::BufReader::with_capacity(1 << 16, file),
            len,
            HeaderLimits::default(),
        )
    }

    /// Check that every tensor's data lies inside a file of `file_len` bytes.
    pub fn check_data(&self, file_len: u64) -> Result<(), GgufError> {
        for t in &self.tensors {
            let end = self
                .data_start
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(t.bytes))
                .ok_or_else(|| GgufError::SizeOverflow {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                })?;
            if end > file_len {
                return Err(GgufError::OutOfBounds {
                    name: t.name.clone(),
                    end,
                    file_len,
                });
            }
        }
        Ok(())
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// A required string value.
    pub fn str(&self, key: &str) -> Result<&str, GgufError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(GgufError::wrong(key, "a string")),
            None => Err(GgufError::MissingKey(key.to_string())),
        }
    }

    /// An optional string value (wrong type is an error).
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(GgufError::wrong(key, "a string")),
        }
    }

    /// An optional unsigned integer that must fit in u32.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .map(Some)
                .ok_or_else(|| GgufError::wrong(key, "an unsigned 32-bit integer")),
        }
    }

    /// A required unsigned integer that must fit in u32.
    pub fn u32(&self, key: &str) -> Result<u32, GgufError> {
        self.opt_u32(key)?
            .ok_or_else(|| GgufError::MissingKey(key.to_string()))
    }

    /// An optional finite float.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x as f32)),
                _ => Err(GgufError::wrong(key, "a finite number")),
            },
        }
    }

    /// An optional array.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(GgufError::wrong(key, "an array")),
        }
    }

    /// A tensor info by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The model family named by `general.architecture`.
    pub fn architecture(&self) -> Result<Architecture, GgufError> {
        let name = self.str("general.architecture")?;
        Architecture::from_gguf_name(name)
            .ok_or_else(|| GgufError::UnknownArchitecture(name.to_string()))
    }

    /// Total bytes of tensor data.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }
}

/// An open GGUF file: the validated header plus a handle for reading tensor data.
#[derive(Debug)]
pub struct GgufFile {
    /// The header.
    pub header: GgufHeader,
    file: std::fs::File,
    /// File length in bytes.
    pub file_len: u64,
}

impl GgufFile {
    /// Open and validate a GGUF file, including the bounds of every tensor's data.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let file = std::fs::File::open(path)?;
        let file_len = file.metadata()?.len();
        let header = GgufHeader::read(
            std::io::BufReader::with_capacity(1 << 16, &file),
            file_len,
            HeaderLimits::default(),
        )?;
        header.check_data(file_len)?;
        Ok(Self {
            header,
            file,
            file_len,
        })
    }

    /// Read the raw bytes of one tensor.
    pub fn tensor_data(&mut self, info: &TensorInfo) -> Result<Vec<u8>, GgufError> {
        let start = self.header.data_start + info.offset;
        self.file.seek(SeekFrom::Start(start))?;
        let mut buf = vec![0u8; info.bytes as usize];
        self.file
            .read_exact(&mut buf)
            .map_err(|e| eof(e, &info.name, start))?;
        Ok(buf)
    }
}
