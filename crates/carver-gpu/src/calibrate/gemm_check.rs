//! Pure helpers of the calibration's GEMM check: 16-bit floats to f32, and the error of an
//! output against an f64 reference. (Timing statistics live in `crate::timing`.)

/// IEEE half-precision bits to f32.
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f32::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

/// bfloat16 bits to f32.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Error of one output element of a GEMM against an f64 reference, relative to the natural
/// scale of a dot product of random numbers, sqrt(sum of squared products). `a_row` and `b_col`
/// hold the row of A and the column of B that produce the element `got`.
pub fn dot_error(a_row: &[f32], b_col: &[f32], got: f32) -> f64 {
    let mut reference = 0.0f64;
    let mut scale = 0.0f64;
    for (a, b) in a_row.iter().zip(b_col) {
        let p = f64::from(*a) * f64::from(*b);
        reference += p;
        scale += p * p;
    }
    if !got.is_finite() {
        return f64::INFINITY;
    }
    (f64::from(got) - reference).abs() / scale.sqrt().max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xbf40), -0.75);
        assert!(bf16_to_f32(0xffff).is_nan());
    }

    #[test]
    fn dot_error_flags_wrong_and_unwritten_outputs() {
        let a = [0.5f32, -0.25, 1.0];
        let b = [1.0f32, 2.0, -0.5];
        // 0.5 - 0.5 - 0.5 = -0.5
        assert!(dot_error(&a, &b, -0.5) < 1e-9);
        assert!(dot_error(&a, &b, 0.5) > 0.5);
        assert_eq!(dot_error(&a, &b, f32::NAN), f64::INFINITY);
    }
}
