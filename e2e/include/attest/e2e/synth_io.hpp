#pragma once
/// Files of a synthetic run: lossless video (FFV1 in Matroska through OpenCV's FFmpeg backend, or
/// a PNG sequence), audio (WAV, 32-bit float, through libsndfile) and the latents (.npy). Every
/// writer stages into an OutputFiles, so a command writes all of its files or none.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/e2e/synth.hpp"

namespace attest::e2e {

/// Stages the frames of `res` as `path`: a `.mkv` or `.avi` file (FFV1, kFps frames per second,
/// lossless), or, when `path` has no extension or ends in '/', a directory of frame_%06d.png
/// (each PNG staged separately). Throws attest::Error naming the path when it cannot be encoded.
void stage_video(OutputFiles& out, const std::filesystem::path& path, const SynthConfig& cfg, const SynthResult& res);

/// Stages the waveform of `res` as a mono 32-bit float WAV at kSampleRate (lossless).
void stage_audio(OutputFiles& out, const std::filesystem::path& path, const SynthResult& res);

/// Stages the latents as .npy float32 [steps + 1, tokens, kChannels].
void stage_latents(OutputFiles& out, const std::filesystem::path& path, const SynthConfig& cfg, const SynthResult& res);
/// Reads latents written by stage_latents; throws attest::Error when the shape does not match
/// `cfg` (naming the file, the shape found and the one expected).
std::vector<float> read_latents(const std::filesystem::path& path, const SynthConfig& cfg);

}  // namespace attest::e2e
