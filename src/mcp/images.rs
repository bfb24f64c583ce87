//! Figures for an MCP client: a PNG made small enough for a model to take
//! as an image (each pixel of the smaller picture averages the pixels it
//! covers), so a 2x "retina" plot does not cost four times the tokens.

use std::io::Cursor;

use anyhow::{Context, Result};

/// The longest side a figure keeps (what the agent's own figures keep).
pub const MAX_SIDE: u32 = 768;

/// The largest picture decoded at all (width times height): a bigger one is
/// left out rather than holding gigabytes in memory.
const MAX_PIXELS: u64 = 64 << 20;

/// `png` with its longer side at most `max_side` pixels; `None` when it
/// already fits.
pub fn downscale_png(png_bytes: &[u8], max_side: u32) -> Result<Option<Vec<u8>>> {
    let mut decoder = png::Decoder::new(Cursor::new(png_bytes));
    // 8 bits a sample, palettes expanded: one layout to average over.
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().context("not a PNG image")?;
    let (width, height) = (reader.info().width, reader.info().height);
    if width.max(height) <= max_side {
        return Ok(None);
    }
    anyhow::ensure!(
        u64::from(width) * u64::from(height) <= MAX_PIXELS,
        "a {width}x{height} picture is too large to shrink"
    );
    let size = reader
        .output_buffer_size()
        .context("the PNG image is too large")?;
    let mut pixels = vec![0; size];
    let frame = reader
        .next_frame(&mut pixels)
        .context("a broken PNG image")?;
    let channels = frame.color_type.samples();
    let scale = f64::from(max_side) / f64::from(width.max(height));
    let new_width = ((f64::from(width) * scale).round() as u32).max(1);
    let new_height = ((f64::from(height) * scale).round() as u32).max(1);
    let small = box_filter(
        &pixels,
        frame.line_size,
        (width, height),
        (new_width, new_height),
        channels,
    );
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, new_width, new_height);
    encoder.set_color(frame.color_type);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&small)?;
    writer.finish()?;
    Ok(Some(out))
}

/// Averages each output pixel's block of input pixels.
fn box_filter(
    pixels: &[u8],
    line_size: usize,
    (width, height): (u32, u32),
    (new_width, new_height): (u32, u32),
    channels: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(new_width as usize * new_height as usize * channels);
    let span = |index: u32, new: u32, old: u32| {
        let start = u64::from(index) * u64::from(old) / u64::from(new);
        let end = (u64::from(index + 1) * u64::from(old) / u64::from(new)).max(start + 1);
        (start as usize, end as usize)
    };
    let mut sums = vec![0u64; channels];
    for y in 0..new_height {
        let (top, bottom) = span(y, new_height, height);
        for x in 0..new_width {
            let (left, right) = span(x, new_width, width);
            sums.fill(0);
            for row in top..bottom {
                let line = &pixels[row * line_size..];
                for column in left..right {
                    let pixel = &line[column * channels..(column + 1) * channels];
                    for (sum, &sample) in sums.iter_mut().zip(pixel) {
                        *sum += u64::from(sample);
                    }
                }
            }
            let count = ((bottom - top) * (right - left)) as u64;
            out.extend(sums.iter().map(|sum| (sum / count) as u8));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_of(width: u32, height: u32, color: png::ColorType, pixels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(pixels).unwrap();
        writer.finish().unwrap();
        out
    }

    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = png::Decoder::new(Cursor::new(bytes)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        pixels.truncate(info.buffer_size());
        (info.width, info.height, pixels)
    }

    #[test]
    fn a_large_picture_is_averaged_down_to_the_longest_side() {
        // 4x2 RGB: the left half black, the right half white.
        let row: Vec<u8> = [[0u8; 3], [0; 3], [255; 3], [255; 3]].concat();
        let source = png_of(4, 2, png::ColorType::Rgb, &[row.clone(), row].concat());
        let (width, height, pixels) = decode(&downscale_png(&source, 2).unwrap().unwrap());
        assert_eq!((width, height), (2, 1));
        assert_eq!(pixels, vec![0, 0, 0, 255, 255, 255]);
    }

    #[test]
    fn a_small_picture_is_kept_as_it_is() {
        let source = png_of(2, 2, png::ColorType::Grayscale, &[0, 50, 100, 150]);
        assert_eq!(downscale_png(&source, 768).unwrap(), None);
    }

    #[test]
    fn odd_sizes_and_alpha_average_every_sample() {
        // 3x1 RGBA to 2x1: each output pixel covers at least one input pixel.
        let source = png_of(
            3,
            1,
            png::ColorType::Rgba,
            &[10, 20, 30, 255, 30, 40, 50, 255, 90, 90, 90, 0],
        );
        let (width, height, pixels) = decode(&downscale_png(&source, 2).unwrap().unwrap());
        assert_eq!((width, height), (2, 1));
        assert_eq!(pixels.len(), 8);
        assert_eq!(&pixels[..4], &[10, 20, 30, 255]);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(downscale_png(b"not a png", 10).is_err());
        assert!(downscale_png(&[0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0], 10).is_err());
    }
}
