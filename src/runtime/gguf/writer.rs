//! Writing GGUF files (tests, `synth`).

use super::*;

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
