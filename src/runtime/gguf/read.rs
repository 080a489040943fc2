//! The header parser: a cursor that checks every count and length against the bytes that
//! remain (and the caps in [`HeaderLimits`]) before allocating, and the tensor-table checks.

use super::*;

/// A reader that knows its position and how many bytes remain, so lengths can be checked
/// against the remainder before allocating.
struct Cur<R> {
    inner: R,
    pos: u64,
    len: u64,
    limits: HeaderLimits,
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

pub(super) fn eof(e: std::io::Error, what: &str, offset: u64) -> GgufError {
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
    /// Read a header from `reader`, which holds `len` bytes from its current position.
    pub fn read<R: Read>(reader: R, len: u64, limits: HeaderLimits) -> Result<Self, GgufError> {
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
