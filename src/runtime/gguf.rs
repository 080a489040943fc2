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

/// `GGUF` in little-endian byte order.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Most elements reserved up front for an array or table whose length comes from the file.
/// Longer ones grow as elements are actually read, so memory follows the bytes consumed,
/// not the count the file claims.
const PREALLOC_CAP: usize = 1 << 12;

/// Default tensor-data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Caps applied while reading; every one is far above what real models use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
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

impl Default for Limits {
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

/// A metadata array, stored by element type so big arrays stay compact.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// u8 elements.
    U8(Vec<u8>),
    /// i8 elements.
    I8(Vec<i8>),
    /// u16 elements.
    U16(Vec<u16>),
    /// i16 elements.
    I16(Vec<i16>),
    /// u32 elements.
    U32(Vec<u32>),
    /// i32 elements.
    I32(Vec<i32>),
    /// u64 elements.
    U64(Vec<u64>),
    /// i64 elements.
    I64(Vec<i64>),
    /// f32 elements.
    F32(Vec<f32>),
    /// f64 elements.
    F64(Vec<f64>),
    /// bool elements.
    Bool(Vec<bool>),
    /// string elements.
    String(Vec<String>),
    /// nested arrays.
    Array(Vec<Array>),
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements as i64 when the array holds integers.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        Some(match self {
            Array::U8(v) => v.iter().map(|&x| x as i64).collect(),
            Array::I8(v) => v.iter().map(|&x| x as i64).collect(),
            Array::U16(v) => v.iter().map(|&x| x as i64).collect(),
            Array::I16(v) => v.iter().map(|&x| x as i64).collect(),
            Array::U32(v) => v.iter().map(|&x| x as i64).collect(),
            Array::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Array::I64(v) => v.clone(),
            Array::U64(v) => v
                .iter()
                .map(|&x| i64::try_from(x).ok())
                .collect::<Option<_>>()?,
            _ => return None,
        })
    }

    /// Elements as f32 when the array holds floats.
    pub fn to_f32s(&self) -> Option<Vec<f32>> {
        match self {
            Array::F32(v) => Some(v.clone()),
            Array::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// u8.
    U8(u8),
    /// i8.
    I8(i8),
    /// u16.
    U16(u16),
    /// i16.
    I16(i16),
    /// u32.
    U32(u32),
    /// i32.
    I32(i32),
    /// u64.
    U64(u64),
    /// i64.
    I64(i64),
    /// f32.
    F32(f32),
    /// f64.
    F64(f64),
    /// bool.
    Bool(bool),
    /// UTF-8 string.
    String(String),
    /// Array.
    Array(Array),
}

impl Value {
    /// The value as an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, if it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
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

/// A reader that knows its position and how many bytes remain, so lengths can be checked
/// against the remainder before allocating.
struct Cur<R> {
    inner: R,
    pos: u64,
    len: u64,
    limits: Limits,
}

impl<R: Read> Cur<R> {
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let mut buf = [0u8; N];
        let at = self.pos;
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| eof(e, what, at))?;
        self.pos += N as u64;
        Ok(buf)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.bytes::<4>(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.bytes::<8>(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > self.limits.max_string {
            return Err(GgufError::TooMany {
                what: "string length",
                count: n,
                limit: self.limits.max_string,
            });
        }
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what: what.to_string(),
                offset: at,
            });
        }
        let mut buf = vec![0u8; n as usize];
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| eof(e, what, at))?;
        self.pos += n;
        String::from_utf8(buf).map_err(|_| GgufError::InvalidUtf8 { offset: at })
    }

    /// Check an element count against the cap and the remaining bytes (each element takes at
    /// least `min_size` bytes in the file).
    fn check_count(
        &self,
        what: &'static str,
        n: u64,
        min_size: u64,
        cap: u64,
    ) -> Result<(), GgufError> {
        let fit = self.remaining() / min_size.max(1);
        let limit = cap.min(fit);
        if n > limit {
            return Err(GgufError::TooMany {
                what,
                count: n,
                limit,
            });
        }
        Ok(())
    }

    fn value(&mut self, key: &str, ty: u32, depth: u32) -> Result<Value, GgufError> {
        let what = key;
        Ok(match ty {
            0 => Value::U8(self.bytes::<1>(what)?[0]),
            1 => Value::I8(self.bytes::<1>(what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.bytes(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.bytes(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(i32::from_le_bytes(self.bytes(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.bytes(what)?)),
            7 => Value::Bool(self.bytes::<1>(what)?[0] != 0),
            8 => Value::String(self.string(what)?),
            9 => Value::Array(self.array(key, depth + 1)?),
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(i64::from_le_bytes(self.bytes(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.bytes(what)?)),
            _ => {
                return Err(GgufError::BadValueType {
                    key: key.to_string(),
                    ty,
                })
            }
        })
    }

    fn array(&mut self, key: &str, depth: u32) -> Result<Array, GgufError> {
        if depth > self.limits.max_depth {
            return Err(GgufError::TooDeep {
                key: key.to_string(),
                limit: self.limits.max_depth,
            });
        }
        let ty = self.u32(key)?;
        let n = self.u64(key)?;
        let elem_size = match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            9 => 12,
            _ => {
                return Err(GgufError::BadValueType {
                    key: key.to_string(),
                    ty,
                })
            }
        };
        self.check_count("array element", n, elem_size, self.limits.max_array)?;
        let n = n as usize;
        macro_rules! prim {
            ($variant:ident, $t:ty) => {{
                let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
                for _ in 0..n {
                    v.push(<$t>::from_le_bytes(self.bytes(key)?));
                }
                Array::$variant(v)
            }};
        }
        Ok(match ty {
            0 => prim!(U8, u8),
            1 => prim!(I8, i8),
            2 => prim!(U16, u16),
            3 => prim!(I16, i16),
            4 => prim!(U32, u32),
            5 => prim!(I32, i32),
            6 => prim!(F32, f32),
            10 => prim!(U64, u64),
            11 => prim!(I64, i64),
            12 => prim!(F64, f64),
            7 => {
                let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
                for _ in 0..n {
                    v.push(self.bytes::<1>(key)?[0] != 0);
                }
                Array::Bool(v)
            }
            8 => {
                let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
                for _ in 0..n {
                    v.push(self.string(key)?);
                }
                Array::String(v)
            }
            _ => {
                let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
                for _ in 0..n {
                    v.push(self.array(key, depth + 1)?);
                }
                Array::Array(v)
            }
        })
    }
}

fn eof(e: std::io::Error, what: &str, offset: u64) -> GgufError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        GgufError::Truncated {
            what: what.to_string(),
            offset,
        }
    } else {
        GgufError::Io(e)
    }
}

impl GgufHeader {
    /// Read the header of the file at `path` (metadata and tensor table only).
    pub fn read_path(path: &Path) -> Result<Self, GgufError> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Self::read(
            std::io::BufReader::with_capacity(1 << 16, file),
            len,
            Limits::default(),
        )
    }

    /// Read a header from `reader`, which holds `len` bytes from its current position.
    pub fn read<R: Read>(reader: R, len: u64, limits: Limits) -> Result<Self, GgufError> {
        let mut c = Cur {
            inner: reader,
            pos: 0,
            len,
            limits,
        };
        let magic = c.bytes::<4>("magic")?;
        if magic != GGUF_MAGIC {
            return Err(GgufError::BadMagic { found: magic });
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let n_tensors = c.u64("tensor count")?;
        let n_kv = c.u64("metadata count")?;
        // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at
        // least 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
        c.check_count("metadata", n_kv, 13, limits.max_kv)?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let ty = c.u32("metadata value type")?;
            let value = c.value(&key, ty, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(GgufError::DuplicateKey(key));
            }
        }
        c.check_count("tensor", n_tensors, 32, limits.max_tensors)?;
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| GgufError::wrong("general.alignment", "an unsigned integer"))?,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(GgufError::BadAlignment(alignment));
        }
        let reserve = (n_tensors as usize).min(PREALLOC_CAP);
        let mut tensors = Vec::with_capacity(reserve);
        let mut names = HashSet::with_capacity(reserve);
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let n_dims = c.u32("tensor dimension count")?;
            if n_dims == 0 || n_dims > limits.max_dims {
                return Err(GgufError::BadDimCount {
                    name,
                    n_dims,
                    limit: limits.max_dims,
                });
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(c.u64("tensor dimension")?);
            }
            let ty = c.u32("tensor type")?;
            let offset = c.u64("tensor offset")?;
            let info = tensor_info(name, dims, ty, offset, alignment)?;
            if !names.insert(info.name.clone()) {
                return Err(GgufError::DuplicateTensor(info.name));
            }
            tensors.push(info);
        }
        let data_start = c
            .pos
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or(GgufError::BadAlignment(alignment))?;
        check_overlaps(&tensors)?;
        Ok(Self {
            version,
            metadata,
            tensors,
            alignment,
            data_start,
        })
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

    /// Read the architecture hyper-parameters once from metadata and check them.
    pub fn arch_params(&self) -> Result<ArchParams, GgufError> {
        let architecture = self.architecture()?;
        let a = architecture.gguf_name();
        let k = |s: &str| format!("{a}.{s}");
        let n_layers = self.u32(&k("block_count"))?;
        let n_heads = self.u32(&k("attention.head_count"))?;
        let n_kv_heads = self
            .opt_u32(&k("attention.head_count_kv"))?
            .unwrap_or(n_heads);
        let hidden = self.u32(&k("embedding_length"))?;
        let ffn = self.u32(&k("feed_forward_length"))?;
        if n_heads == 0 {
            return Err(ArchError::Zero { field: "n_heads" }.into());
        }
        let head_dim = match self.opt_u32(&k("attention.key_length"))? {
            Some(d) => d,
            None => {
                if hidden % n_heads != 0 {
                    return Err(GgufError::Inconsistent(format!(
                        "embedding length {hidden} is not a multiple of {n_heads} heads and no key_length is given"
                    )));
                }
                hidden / n_heads
            }
        };
        let head_dim_v = self
            .opt_u32(&k("attention.value_length"))?
            .unwrap_or(head_dim);
        let token_embd = self.tensor("token_embd.weight");
        let vocab = match self.opt_u32(&k("vocab_size"))? {
            Some(v) => v,
            None => match self.opt_array("tokenizer.ggml.tokens")? {
                Some(a) => u32::try_from(a.len()).unwrap_or(u32::MAX),
                None => token_embd
                    .and_then(|t| t.dims.get(1).copied())
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or_else(|| GgufError::MissingKey(k("vocab_size")))?,
            },
        };
        let rope_base = self.opt_f32(&k("rope.freq_base"))?.unwrap_or(10_000.0);
        let rope_scaling = match self.opt_str(&k("rope.scaling.type"))? {
            None | Some("none") => None,
            Some(kind) => {
                let factor = self.opt_f32(&k("rope.scaling.factor"))?.unwrap_or(1.0);
                match kind {
                    "linear" => Some(RopeScaling::Linear { factor }),
                    "yarn" => Some(RopeScaling::Yarn {
                        factor,
                        original_context: self
                            .opt_u32(&k("rope.scaling.original_context_length"))?
                            .unwrap_or(0),
                    }),
                    _ => {
                        return Err(GgufError::wrong(
                            &k("rope.scaling.type"),
                            "none, linear or yarn",
                        ))
                    }
                }
            }
        };
        let norm_eps = self
            .opt_f32(&k("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-5);
        let context_length = self.opt_u32(&k("context_length"))?.unwrap_or(2048);
        let sliding_window = self.opt_u32(&k("attention.sliding_window"))?;
        let tied_embeddings = self.tensor("output.weight").is_none();
        let p = ArchParams {
            architecture,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            head_dim_v,
            hidden,
            ffn,
            vocab,
            rope_base,
            rope_scaling,
            norm_eps,
            context_length,
            sliding_window,
            tied_embeddings,
        };
        p.validate()?;
        if let Some(t) = token_embd {
            if t.dims.first().copied() != Some(hidden as u64) {
                return Err(GgufError::Inconsistent(format!(
                    "token_embd.weight has dims {:?} but embedding_length is {hidden}",
                    t.dims
                )));
            }
        }
        Ok(p)
    }
}

fn tensor_info(
    name: String,
    dims: Vec<u64>,
    ty: u32,
    offset: u64,
    alignment: u64,
) -> Result<TensorInfo, GgufError> {
    // No real tensor has a dimension near 2^40; this also rejects "negative" values
    // written as two's complement.
    const MAX_DIM: u64 = 1 << 40;
    if let Some(&dim) = dims.iter().find(|&&d| d == 0 || d > MAX_DIM) {
        return Err(GgufError::BadDim { name, dim, dims });
    }
    let Some(ggml_type) = GgmlType::from_id(ty) else {
        return Err(GgufError::UnknownType { name, ty });
    };
    let Some(elems) = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
        return Err(GgufError::SizeOverflow { name, dims });
    };
    if elems % ggml_type.block_elems() != 0 {
        return Err(GgufError::NotBlockMultiple {
            name,
            elems,
            ty: ggml_type.name(),
        });
    }
    let row = dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ggml_type.block_elems()) {
        return Err(GgufError::RowNotBlockMultiple {
            name,
            row,
            ty: ggml_type.name(),
        });
    }
    let Some(bytes) = ggml_type.tensor_bytes(elems) else {
        return Err(GgufError::SizeOverflow { name, dims });
    };
    if !offset.is_multiple_of(alignment) {
        return Err(GgufError::Unaligned {
            name,
            offset,
            alignment,
        });
    }
    if offset.checked_add(bytes).is_none() {
        return Err(GgufError::SizeOverflow { name, dims });
    }
    Ok(TensorInfo {
        name,
        ggml_type,
        dims,
        offset,
        bytes,
    })
}

fn check_overlaps(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for w in order.windows(2) {
        // offsets + bytes were checked for overflow in `tensor_info`.
        if w[0].offset + w[0].bytes > w[1].offset {
            return Err(GgufError::Overlap {
                first: w[0].name.clone(),
                second: w[1].name.clone(),
            });
        }
    }
    Ok(())
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
            Limits::default(),
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

/// Writes GGUF files: used by tests and by `synth` to make small seeded models.
///
/// Values are written exactly as given, so tests can also produce deliberately malformed
/// headers by writing raw tensor infos (`raw_tensor`).
#[derive(Debug, Default)]
pub struct GgufWriter {
    kv: Vec<(String, Value)>,
    infos: Vec<(String, Vec<u64>, u32, u64)>,
    data: Vec<u8>,
    alignment: u64,
}

impl GgufWriter {
    /// An empty writer with the default alignment.
    pub fn new() -> Self {
        Self {
            alignment: DEFAULT_ALIGNMENT,
            ..Self::default()
        }
    }

    /// Add a metadata value.
    pub fn kv(&mut self, key: &str, value: Value) -> &mut Self {
        if key == "general.alignment" {
            if let Some(a) = value.as_u64().filter(|a| a.is_power_of_two()) {
                self.alignment = a;
            }
        }
        self.kv.push((key.to_string(), value));
        self
    }

    /// Add a tensor with its raw GGML bytes; `dims` are in GGUF order (innermost first).
    pub fn tensor(&mut self, name: &str, ty: GgmlType, dims: &[u64], bytes: &[u8]) -> &mut Self {
        let pad = (self.alignment - self.data.len() as u64 % self.alignment) % self.alignment;
        self.data.extend(std::iter::repeat_n(0u8, pad as usize));
        let offset = self.data.len() as u64;
        self.data.extend_from_slice(bytes);
        self.infos
            .push((name.to_string(), dims.to_vec(), ty.id(), offset));
        self
    }

    /// Add a tensor-info entry verbatim, without data (for malformed-file tests).
    pub fn raw_tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.infos
            .push((name.to_string(), dims.to_vec(), ty, offset));
        self
    }

    /// Append raw bytes to the data section (for malformed-file tests).
    pub fn raw_data(&mut self, bytes: &[u8]) -> &mut Self {
        self.data.extend_from_slice(bytes);
        self
    }

    /// Serialize the whole file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() + 4096);
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.infos.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            put_str(&mut out, k);
            out.extend_from_slice(&value_type(v).to_le_bytes());
            put_value(&mut out, v);
        }
        for (name, dims, ty, offset) in &self.infos {
            put_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        let pad = (self.alignment - out.len() as u64 % self.alignment) % self.alignment;
        out.extend(std::iter::repeat_n(0u8, pad as usize));
        out.extend_from_slice(&self.data);
        out
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn value_type(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn array_type(a: &Array) -> u32 {
    match a {
        Array::U8(_) => 0,
        Array::I8(_) => 1,
        Array::U16(_) => 2,
        Array::I16(_) => 3,
        Array::U32(_) => 4,
        Array::I32(_) => 5,
        Array::F32(_) => 6,
        Array::Bool(_) => 7,
        Array::String(_) => 8,
        Array::Array(_) => 9,
        Array::U64(_) => 10,
        Array::I64(_) => 11,
        Array::F64(_) => 12,
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&array_type(a).to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
        Array::String(v) => v.iter().for_each(|s| put_str(out, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(out, a)),
    }
}
