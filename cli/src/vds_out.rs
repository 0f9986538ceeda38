//! `convert IN out.vds` with several channels: `--channel NAME=PATH[:ELEMENT]` (an array of
//! another input, repeatable) and `--all` (every array of IN). The primary channel is IN's
//! array; each other channel is one more array streamed into the same
//! [`rasterpack_vds_meta::write::VdsWriter`] after it (the library's one path for several
//! channels). Every channel must have the primary's shape and a dtype VDS stores: checked here,
//! before anything is written, where the sources list their arrays' shapes.

use std::path::{Path, PathBuf};

use rasterpack_common::{shown, ArrayInfo, ArrayRequest, Error, Format, Input, Limits};
use rasterpack_vds_meta::write::{sample_format, ChannelSpec};

use crate::args::ConvertArgs;
use crate::detect;

/// One channel beside the primary: where its array comes from.
pub struct Channel {
    /// The VDS channel name.
    pub name: String,
    pub input: Input,
    pub source: &'static dyn Format,
    pub req: ArrayRequest,
    /// How the channel is named in messages and the progress bar.
    pub label: String,
}

impl Channel {
    /// What the writer is told of the channel.
    pub fn spec(&self) -> ChannelSpec {
        ChannelSpec {
            name: self.name.clone(),
            ..Default::default()
        }
    }
}

/// Split `NAME=PATH[:ELEMENT]`. The element is what follows the last `:` when the part before
/// it names an existing file or directory, or a URL with a path (so `http://host:9000/k.npy`
/// keeps its port); a PATH that exists whole is never split.
pub fn parse_spec(spec: &str) -> Result<(String, PathBuf, Option<String>), Error> {
    let bad = |why: &str| Error::usage(format!("--channel {spec:?}: {why} (expected NAME=PATH[:ELEMENT])"));
    let (name, rest) = spec.split_once('=').ok_or_else(|| bad("no '='"))?;
    if name.is_empty() {
        return Err(bad("the channel name is empty"));
    }
    if rest.is_empty() {
        return Err(bad("the path is empty"));
    }
    if !Path::new(rest).exists() {
        if let Some((path, element)) = rest.rsplit_once(':') {
            let url_with_path = path.split_once("://").is_some_and(|(_, after)| after.contains('/'));
            if !path.is_empty() && !element.is_empty() && (Path::new(path).exists() || url_with_path) {
                return Ok((name.to_string(), PathBuf::from(path), Some(element.to_string())));
            }
        }
    }
    Ok((name.to_string(), PathBuf::from(rest), None))
}

/// A channel name from a source's array name: `/` (UDF `DATASET/TABLE`, FOLD `CHUNK/ARRAY`)
/// becomes `.`, since a channel's name starts its layers' names, which are object keys in the
/// directory layout.
fn channel_name(name: &str) -> String {
    name.replace('/', ".")
}

/// The channels beside the primary that `--all` and `--channel` ask for, checked: with `--all`,
/// `primary` is set to IN's first array and every other array is a channel (in IN's order),
/// then the `--channel` ones. `whole` is whether the arrays are read whole (no subset, level of
/// detail, squeeze or expand-dims): then each one's shape is compared with the primary's here.
pub fn channels(
    args: &ConvertArgs,
    input: &Input,
    source: &'static dyn Format,
    primary: &mut ArrayRequest,
    limits: &Limits,
    whole: bool,
) -> Result<Vec<Channel>, Error> {
    let mut out = Vec::new();
    if args.all {
        if !args.element.is_empty() {
            return Err(Error::usage(
                "--all writes every array of IN as a channel: it takes no --element",
            ));
        }
        let arrays = source.open(input.clone(), *limits)?.arrays_complete()?;
        let Some(first) = arrays.first() else {
            return Err(Error::usage(format!("{} holds no array", shown(&args.input))));
        };
        primary.element = first.name.clone();
        for (k, info) in arrays.iter().enumerate().skip(1) {
            let name = info.name.clone().ok_or_else(|| {
                Error::usage(format!(
                    "array {k} of {} has no name to give its VDS channel",
                    shown(&args.input)
                ))
            })?;
            out.push(Channel {
                name: channel_name(&name),
                input: input.clone(),
                source,
                req: ArrayRequest {
                    element: Some(name.clone()),
                    ..primary.clone()
                },
                label: format!("{} {name}", shown(&args.input)),
            });
        }
    }
    for spec in &args.channels {
        let (name, path, element) = parse_spec(spec)?;
        let input = detect::open(&path, limits)?;
        let source = detect::detect(&input).map_err(|e| e.in_format("convert"))?;
        out.push(Channel {
            label: format!("{} ({name})", shown(&path)),
            name,
            input,
            source,
            req: ArrayRequest {
                element,
                ..primary.clone()
            },
        });
    }
    if out.is_empty() {
        return Ok(out);
    }
    let mut names = vec![];
    for c in &out {
        if names.contains(&&c.name) {
            return Err(Error::usage(format!(
                "two VDS channels named {:?}: channel names are unique",
                c.name
            )));
        }
        names.push(&c.name);
    }
    if whole {
        let want = array_info(source, input, primary, limits)?;
        for c in &out {
            let Some(info) = array_info(c.source, &c.input, &c.req, limits)? else {
                continue;
            };
            sample_format(info.dtype)
                .map_err(|e| Error::usage(format!("the VDS channel {:?} ({}): {}", c.name, c.label, e.message)))?;
            if let Some(want) = &want {
                if info.shape != want.shape {
                    return Err(Error::usage(format!(
                        "the VDS channel {:?} ({}) has shape {:?}, not the primary channel's {:?}: every channel of a VDS spans the whole volume",
                        c.name, c.label, info.shape, want.shape
                    )));
                }
            }
        }
    }
    Ok(out)
}

/// The array `req` names in `input` as its source lists it (its only one when unnamed), or
/// `None` when the listing does not say (the writer checks the shape again as it begins).
fn array_info(
    source: &'static dyn Format,
    input: &Input,
    req: &ArrayRequest,
    limits: &Limits,
) -> Result<Option<ArrayInfo>, Error> {
    let Ok(file) = source.open(input.clone(), *limits) else {
        return Ok(None);
    };
    let arrays = file.arrays()?;
    Ok(match (&req.element, arrays.as_slice()) {
        (None, [only]) => Some(only.clone()),
        (Some(e), _) => arrays.iter().find(|a| a.name.as_deref() == Some(e.as_str())).cloned(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_at_the_element_only_after_a_path() {
        let dir = std::env::temp_dir().join(format!("rp-vds-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.gvrs");
        std::fs::write(&f, b"x").unwrap();
        let p = f.to_str().unwrap();
        assert_eq!(
            parse_spec(&format!("V={p}:elev")).unwrap(),
            ("V".into(), f.clone(), Some("elev".into()))
        );
        assert_eq!(
            parse_spec(&format!("V={p}:data/t1")).unwrap().2.as_deref(),
            Some("data/t1")
        );
        assert_eq!(parse_spec(&format!("V={p}")).unwrap().2, None);
        assert_eq!(
            parse_spec("V=s3://b/k.gvrs:elev").unwrap(),
            ("V".into(), PathBuf::from("s3://b/k.gvrs"), Some("elev".into()))
        );
        assert_eq!(
            parse_spec("V=http://host:9000/k.npy").unwrap(),
            ("V".into(), PathBuf::from("http://host:9000/k.npy"), None)
        );
        assert!(parse_spec("=a.npy").is_err());
        assert!(parse_spec("a.npy").is_err());
        assert!(parse_spec("V=").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
