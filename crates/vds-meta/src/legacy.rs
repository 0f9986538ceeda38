//! The legacy layout: containers written by older Bluware/Hue tools hold no `VolumeDataLayout`
//! JSON, only an `'OBJ '` file `VDSObject` with a Hue text object (`CreateObj("HueVDSSubset",
//! ...) { Key=value; Block: { ... } ... }`). This parses that text (bounded, depth-limited) into
//! the same layout model. Learned from OpenVDS's own `subset.vds`; fields not needed by the model
//! are ignored.

use rasterpack_common::{Error, Findings, Result};

use crate::layout::{
    VdsAxis, VdsChannel, VdsChannelMapping, VdsLayoutDescriptor, VdsMetaValue, VdsMetadataItem, VdsSampleFormat,
    VolumeDataLayout,
};

/// A parsed Hue value.
#[derive(Debug, Clone)]
enum Hv {
    /// A quoted string.
    Str(String),
    /// An unquoted value (number, enum-like token).
    Raw(String),
    /// `Key: { items }`.
    Block(Vec<(String, Hv)>),
    /// `Key: { count, { items }, { items } }`.
    List(Vec<Vec<(String, Hv)>>),
    /// A nested `CreateObj("Type", ...) { items }`.
    Obj(String, Vec<(String, Hv)>),
}

struct P<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid_at("vds.legacy_layout.syntax", None, msg)
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> Result<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(bad(format!("expected '{}' at byte {}", c as char, self.i)))
        }
    }
    fn ident(&mut self) -> Result<String> {
        self.ws();
        let s = self.i;
        while self.i < self.b.len() && (self.b[self.i].is_ascii_alphanumeric() || self.b[self.i] == b'_') {
            self.i += 1;
        }
        if s == self.i {
            return Err(bad(format!("expected a name at byte {}", self.i)));
        }
        Ok(String::from_utf8_lossy(&self.b[s..self.i]).into_owned())
    }
    fn string(&mut self) -> Result<String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'"' => return Ok(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    if let Some(&n) = self.b.get(self.i) {
                        out.push(n);
                        self.i += 1;
                    }
                }
                _ => out.push(c),
            }
        }
        Err(bad("unterminated string"))
    }
    /// Everything up to the next `;` (exclusive), trimmed.
    fn raw(&mut self) -> Result<String> {
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i] != b';' {
            self.i += 1;
        }
        if self.i >= self.b.len() {
            return Err(bad("value without ';'"));
        }
        Ok(String::from_utf8_lossy(&self.b[s..self.i]).trim().to_owned())
    }
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > 32 {
            return Err(bad("objects nest deeper than 32"));
        }
        Ok(())
    }
    /// `CreateObj("Type", "Parent", id) { items }` (the keyword already read).
    fn object(&mut self) -> Result<Hv> {
        self.eat(b'(')?;
        let ty = self.string()?;
        self.eat(b',')?;
        let _parent = self.string()?;
        self.eat(b',')?;
        let _id = self.raw_until(b')')?;
        self.eat(b')')?;
        self.eat(b'{')?;
        let items = self.items()?;
        self.eat(b'}')?;
        Ok(Hv::Obj(ty, items))
    }
    fn raw_until(&mut self, end: u8) -> Result<String> {
        self.ws();
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i] != end {
            self.i += 1;
        }
        Ok(String::from_utf8_lossy(&self.b[s..self.i]).trim().to_owned())
    }
    /// Items until a closing `}` (not consumed) or the end.
    fn items(&mut self) -> Result<Vec<(String, Hv)>> {
        self.enter()?;
        let mut v = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'}') => break,
                _ => {}
            }
            let key = self.ident()?;
            if key == "CreateObj" {
                let o = self.object()?;
                v.push((key, o));
                continue;
            }
            match self.peek() {
                Some(b'=') => {
                    self.i += 1;
                    let val = if self.peek() == Some(b'"') {
                        Hv::Str(self.string()?)
                    } else {
                        Hv::Raw(self.raw()?)
                    };
                    self.eat(b';')?;
                    v.push((key, val));
                }
                Some(b':') => {
                    self.i += 1;
                    self.eat(b'{')?;
                    let save = self.i;
                    // `{ count, { ... }, ... }` is a list; anything else a block.
                    let is_list = self.peek().is_some_and(|c| c.is_ascii_digit()) && {
                        // Look ahead over the count only (no unbounded scan).
                        while self.b.get(self.i).is_some_and(|c| c.is_ascii_digit()) {
                            self.i += 1;
                        }
                        matches!(self.peek(), Some(b',') | Some(b'}'))
                    };
                    if is_list {
                        let mut list = Vec::new();
                        while self.peek() == Some(b',') {
                            self.i += 1;
                            self.eat(b'{')?;
                            list.push(self.items()?);
                            self.eat(b'}')?;
                        }
                        self.eat(b'}')?;
                        v.push((key, Hv::List(list)));
                    } else {
                        self.i = save;
                        let items = self.items()?;
                        self.eat(b'}')?;
                        v.push((key, Hv::Block(items)));
                    }
                }
                _ => return Err(bad(format!("expected '=' or ':' after {key} at byte {}", self.i))),
            }
        }
        self.depth -= 1;
        Ok(v)
    }
}

fn find<'a>(items: &'a [(String, Hv)], key: &str) -> Option<&'a Hv> {
    items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}
fn text(items: &[(String, Hv)], key: &str) -> Option<String> {
    match find(items, key)? {
        Hv::Str(s) | Hv::Raw(s) => Some(s.clone()),
        _ => None,
    }
}
fn num(items: &[(String, Hv)], key: &str) -> Option<f64> {
    text(items, key)?.parse().ok()
}
fn int(items: &[(String, Hv)], key: &str) -> Option<i64> {
    text(items, key)?.parse().ok()
}
fn flag(items: &[(String, Hv)], key: &str) -> Option<bool> {
    match text(items, key)?.as_str() {
        "TRUE" => Some(true),
        "FALSE" => Some(false),
        _ => None,
    }
}
fn range(items: &[(String, Hv)], key: &str) -> Option<[f64; 2]> {
    match find(items, key)? {
        Hv::Block(b) => Some([num(b, "Min")?, num(b, "Max")?]),
        _ => None,
    }
}
fn need<T>(v: Option<T>, what: &str) -> Result<T> {
    v.ok_or_else(|| {
        Error::invalid_at(
            "vds.legacy_layout.field",
            None,
            format!("VDSObject: {what} missing or malformed"),
        )
    })
}
fn format_of(s: &str) -> Option<VdsSampleFormat> {
    VdsSampleFormat::from_name(&format!("Format_{}", s.strip_prefix("HUEVOXELFORMAT_")?))
}
fn components_of(s: &str) -> Option<u32> {
    match s.strip_prefix("HUEVOXELCOMPONENTS_")? {
        "1" => Some(1),
        "2" => Some(2),
        "4" => Some(4),
        _ => None,
    }
}

/// Parse a `VDSObject` text into the layout model: the root `CreateObj` (a `HueVDS*` object),
/// then its axes, channels, brick layout and metadata objects, in that order.
pub fn parse_vdsobject(bytes: &[u8], f: &mut Findings) -> Result<VolumeDataLayout> {
    let it = root_object(bytes, f)?;
    let dims = need(
        text(&it, "Dimensions").and_then(|d| d.strip_prefix("HUEDIMENSION_")?.parse::<usize>().ok()),
        "Dimensions",
    )?;
    if !(1..=6).contains(&dims) {
        return Err(Error::invalid_at(
            "vds.layout.dimensionality",
            None,
            format!("{dims} dimensions"),
        ));
    }
    let axes = parse_axes(&it, dims)?;
    let mut channels = vec![parse_primary_channel(&it)?];
    parse_extra_channels(&it, &mut channels)?;
    let layout = parse_brick_layout(&it, dims)?;
    let metadata = parse_metadata(&it, f);
    Ok(VolumeDataLayout {
        axes,
        channels,
        layout,
        metadata,
    })
}

/// The items of the root object: the text starts with `CreateObj(...)`, of a `HueVDS*` type
/// (another type is a warning).
fn root_object(bytes: &[u8], f: &mut Findings) -> Result<Vec<(String, Hv)>> {
    let mut p = P {
        b: bytes,
        i: 0,
        depth: 0,
    };
    let key = p.ident()?;
    if key != "CreateObj" {
        return Err(bad("VDSObject does not start with CreateObj"));
    }
    let Hv::Obj(ty, it) = p.object()? else {
        return Err(bad("no object"));
    };
    if !ty.starts_with("HueVDS") {
        f.warning("vds.legacy_layout.object_type", None, format!("VDSObject is a {ty:?}"));
    }
    Ok(it)
}

/// `Dimension<d>Name/Unit/Size/Coordinate` for each of the `dims` axes (sizes at least 1).
fn parse_axes(it: &[(String, Hv)], dims: usize) -> Result<Vec<VdsAxis>> {
    let mut axes = Vec::new();
    for d in 0..dims {
        let n = need(int(it, &format!("Dimension{d}Size")), "DimensionNSize")?;
        if n < 1 {
            return Err(Error::invalid_at(
                "vds.layout.axis_size",
                None,
                format!("dimension {d} size {n}"),
            ));
        }
        let c = need(range(it, &format!("Dimension{d}Coordinate")), "DimensionNCoordinate")?;
        axes.push(VdsAxis {
            name: need(text(it, &format!("Dimension{d}Name")), "DimensionNName")?,
            unit: text(it, &format!("Dimension{d}Unit")).unwrap_or_default(),
            num_samples: n as u64,
            coordinate_min: c[0],
            coordinate_max: c[1],
        });
    }
    Ok(axes)
}

/// The primary channel, described by the root object's `Voxel*` and `Value*` items.
fn parse_primary_channel(it: &[(String, Hv)]) -> Result<VdsChannel> {
    let fmt = need(text(it, "VoxelFormat").as_deref().and_then(format_of), "VoxelFormat")?;
    Ok(VdsChannel {
        name: need(text(it, "ValueName"), "ValueName")?,
        unit: text(it, "ValueUnit").unwrap_or_default(),
        format: fmt,
        components: need(
            text(it, "VoxelComponents").as_deref().and_then(components_of),
            "VoxelComponents",
        )?,
        value_range: need(range(it, "ValueRange"), "ValueRange")?,
        mapping: VdsChannelMapping::Direct,
        mapped_values: 0,
        discrete: flag(it, "DiscreteData").unwrap_or(false),
        renderable: true,
        allow_lossy_compression: true,
        use_no_value: flag(it, "UseNoValue").unwrap_or(false),
        no_value: num(it, "NoValue").unwrap_or(0.0),
        integer_scale: num(it, "IntegerScale").unwrap_or(1.0),
        integer_offset: num(it, "IntegerOffset").unwrap_or(0.0),
    })
}

/// Further channels from the `VolumeDataChannelDescriptor` list; a channel mapping other than
/// 0 / -1 names the per-trace mapping object.
fn parse_extra_channels(it: &[(String, Hv)], channels: &mut Vec<VdsChannel>) -> Result<()> {
    if let Some(Hv::List(list)) = find(it, "VolumeDataChannelDescriptor") {
        for c in list {
            let mapping = match int(c, "ChannelMapping") {
                // Direct is 0/-1; any other value names a mapping object: the trace mapping.
                Some(0) | Some(-1) | None => VdsChannelMapping::Direct,
                Some(_) => VdsChannelMapping::PerTrace,
            };
            channels.push(VdsChannel {
                name: need(text(c, "Name"), "channel Name")?,
                unit: text(c, "Unit").unwrap_or_default(),
                format: need(text(c, "Format").as_deref().and_then(format_of), "channel Format")?,
                components: need(
                    text(c, "Components").as_deref().and_then(components_of),
                    "channel Components",
                )?,
                value_range: need(range(c, "ValueRange"), "channel ValueRange")?,
                mapping,
                mapped_values: need(
                    int(c, "MappedValues").and_then(|m| u64::try_from(m).ok()),
                    "MappedValues",
                )?,
                discrete: flag(c, "Discrete").unwrap_or(false),
                renderable: flag(c, "Renderable").unwrap_or(true),
                allow_lossy_compression: flag(c, "AllowLossyCompression").unwrap_or(true),
                use_no_value: flag(c, "UseNoValue").unwrap_or(false),
                no_value: num(c, "NoValue").unwrap_or(0.0),
                integer_scale: num(c, "IntegerScale").unwrap_or(1.0),
                integer_offset: num(c, "IntegerOffset").unwrap_or(0.0),
            });
        }
    }
    Ok(())
}

/// Brick size (a power of two, 32..=4096), margins (smaller than a brick together), LOD
/// levels (at most 12) and the full-resolution dimension (-1 or an axis).
fn parse_brick_layout(it: &[(String, Hv)], dims: usize) -> Result<VdsLayoutDescriptor> {
    let bs = need(
        text(it, "FullVCSize").and_then(|s| s.strip_prefix("HUEVCSIZE_")?.parse::<u32>().ok()),
        "FullVCSize",
    )?;
    if !(32..=4096).contains(&bs) || !bs.is_power_of_two() {
        return Err(Error::invalid_at(
            "vds.layout.brick_size",
            None,
            format!("brick size {bs}"),
        ));
    }
    let neg = need(int(it, "NegativeMargin"), "NegativeMargin")?;
    let pos = need(int(it, "PositiveMargin"), "PositiveMargin")?;
    let (neg_margin, pos_margin) = crate::layout::check_margins(neg, pos, bs)?;
    let lod = need(
        text(it, "LODLevels").and_then(|s| {
            if s == "LODLevelNone" {
                Some(0)
            } else {
                s.strip_prefix("LODLevel")?.parse::<u32>().ok()
            }
        }),
        "LODLevels",
    )?;
    if lod > 12 {
        return Err(Error::invalid_at(
            "vds.layout.lod_levels",
            None,
            format!("{lod} LOD levels"),
        ));
    }
    let full_res = int(it, "FullResolutionDimension").unwrap_or(-1);
    if full_res < -1 || full_res >= dims as i64 {
        return Err(Error::invalid_at(
            "vds.layout.full_resolution_dimension",
            None,
            format!("{full_res}"),
        ));
    }
    Ok(VdsLayoutDescriptor {
        brick_size_enum: format!("BrickSize_{bs}"),
        brick_size: bs,
        negative_margin: neg_margin,
        positive_margin: pos_margin,
        brick_size_2d_multiplier: 4,
        lod_levels: lod,
        create_2d_lods: flag(it, "Create2DLODs").unwrap_or(false),
        force_full_resolution_dimension: flag(it, "ForceFullResolutionDimension").unwrap_or(false),
        full_resolution_dimension: full_res as i32,
    })
}

/// Nested `CreateObj("Metadata*", ...)` objects with `Name`, `Type`, `Category` and `Value`;
/// one without Name/Type is a warning, one of a type not understood is skipped with a note.
fn parse_metadata(it: &[(String, Hv)], f: &mut Findings) -> Vec<VdsMetadataItem> {
    let mut metadata = Vec::new();
    for (k, v) in it {
        let (true, Hv::Obj(ty, m)) = (k == "CreateObj", v) else {
            continue;
        };
        if !ty.starts_with("Metadata") {
            continue;
        }
        let (Some(name), Some(type_name)) = (text(m, "Name"), text(m, "Type")) else {
            f.warning(
                "vds.legacy_layout.metadata",
                None,
                format!("metadata object {ty:?} without Name/Type"),
            );
            continue;
        };
        let category = text(m, "Category").unwrap_or_default();
        let value = metadata_value(&type_name, find(m, "Value"));
        match value {
            Some(value) => metadata.push(VdsMetadataItem {
                category,
                name,
                type_name,
                value,
            }),
            None => f.info(
                "vds.legacy_layout.metadata",
                None,
                format!("metadata {category}/{name} of type {type_name} not understood; skipped"),
            ),
        }
    }
    metadata
}

/// A metadata object's value of type `type_name`: a scalar, a string, or a vector with
/// components `X`, `Y`, `Z`, `T`.
fn metadata_value(type_name: &str, value: Option<&Hv>) -> Option<VdsMetaValue> {
    let comps = |b: &[(String, Hv)]| -> Vec<f64> { ["X", "Y", "Z", "T"].iter().filter_map(|c| num(b, c)).collect() };
    match (type_name, value) {
        ("String", Some(Hv::Str(s))) => Some(VdsMetaValue::String(s.clone())),
        ("Int", Some(Hv::Raw(s))) => s.parse().ok().map(|i| VdsMetaValue::Int(vec![i])),
        ("Float", Some(Hv::Raw(s))) => s.parse().ok().map(|x| VdsMetaValue::Float(vec![x])),
        ("Double", Some(Hv::Raw(s))) => s.parse().ok().map(|x| VdsMetaValue::Double(vec![x])),
        (t, Some(Hv::Block(b))) if t.starts_with("IntVector") => {
            Some(VdsMetaValue::Int(comps(b).iter().map(|&x| x as i64).collect()))
        }
        (t, Some(Hv::Block(b))) if t.starts_with("FloatVector") => Some(VdsMetaValue::Float(comps(b))),
        (t, Some(Hv::Block(b))) if t.starts_with("DoubleVector") => Some(VdsMetaValue::Double(comps(b))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"CreateObj("HueVDSSubset", "", 1)
{
Name="Subset";
InputChannelDescriptor0:
{
  1,
  {
    Format=-1;
    Name="";
  }
}
VoxelFormat="HUEVOXELFORMAT_R32";
VoxelComponents="HUEVOXELCOMPONENTS_1";
ValueName="Amplitude";
ValueUnit="unitless";
ValueRange:
{
  Min=-1.5;
  Max=1.5;
}
FullVCSize="HUEVCSIZE_64";
NegativeMargin=2;
PositiveMargin=2;
LODLevels="LODLevel1";
Dimensions="HUEDIMENSION_2";
Dimension0Name="Sample";
Dimension0Unit="ms";
Dimension0Size=50;
Dimension0Coordinate:
{
  Min=0;
  Max=196;
}
Dimension1Name="Trace";
Dimension1Size=20;
Dimension1Coordinate:
{
  Min=1;
  Max=20;
}
VolumeDataChannelDescriptor:
{
  1,
  {
    Format="HUEVOXELFORMAT_U8";
    Components="HUEVOXELCOMPONENTS_1";
    Name="Trace";
    ValueRange:
    {
      Min=0;
      Max=256;
    }
    ChannelMapping=1976800267773298824;
    MappedValues=1;
  }
}
HistogramBLOB=N:0:;
CreateObj("MetadataDoubleVector2", "MetadataList", 2)
{
  Name="Origin";
  Category="SurveyCoordinateSystem";
  Type="DoubleVector2";
  Value:
  {
    X=1.5;
    Y=-2.25;
  }
}
CreateObj("MetadataString", "MetadataList", 3)
{
  Name="Unit";
  Category="SurveyCoordinateSystem";
  Type="String";
  Value="m";
}
}
"#;

    #[test]
    fn parses_a_hue_object() {
        let l = parse_vdsobject(SAMPLE.as_bytes(), &mut Findings::new()).unwrap();
        assert_eq!(l.axes.len(), 2);
        assert_eq!(l.axes[0].num_samples, 50);
        assert_eq!(l.axes[0].coordinate_max, 196.0);
        assert_eq!(l.channels.len(), 2);
        assert_eq!(l.channels[1].mapping, VdsChannelMapping::PerTrace);
        assert_eq!(l.channels[1].format, VdsSampleFormat::U8);
        assert_eq!(l.layout.brick_size, 64);
        assert_eq!(l.layout.lod_levels, 1);
        assert_eq!(l.metadata.len(), 2);
        assert_eq!(l.metadata[0].value, VdsMetaValue::Double(vec![1.5, -2.25]));
        assert_eq!(l.metadata[1].value, VdsMetaValue::String("m".into()));
    }

    /// Margins are compared without adding them: `i64::MAX + 1` overflowed (a panic with
    /// overflow checks, a wrapped sum that passed the check without them).
    #[test]
    fn extreme_margins_are_out_of_range() {
        for (neg, pos) in [
            ("9223372036854775807", "1"),
            ("1", "9223372036854775807"),
            ("4294967296", "0"),
            ("32", "32"),
            ("-1", "0"),
        ] {
            let text = SAMPLE
                .replace("NegativeMargin=2;", &format!("NegativeMargin={neg};"))
                .replace("PositiveMargin=2;", &format!("PositiveMargin={pos};"));
            let e = parse_vdsobject(text.as_bytes(), &mut Findings::new()).unwrap_err();
            assert_eq!(e.code, "vds.layout.margin", "{neg}/{pos}: {e}");
        }
    }

    #[test]
    fn truncated_or_flipped_text_never_panics() {
        let b = SAMPLE.as_bytes();
        for cut in 0..b.len() {
            let _ = parse_vdsobject(&b[..cut], &mut Findings::new());
            let mut x = b.to_vec();
            x[cut] ^= 0x5A;
            let _ = parse_vdsobject(&x, &mut Findings::new());
        }
        let deep = "CreateObj(\"HueVDS\", \"\", 1) {".to_string() + &"A: {".repeat(100);
        assert!(parse_vdsobject(deep.as_bytes(), &mut Findings::new()).is_err());
    }
}
