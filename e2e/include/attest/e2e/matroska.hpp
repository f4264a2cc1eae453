#pragma once
/// Reproducible Matroska bytes. libavformat's Matroska muxer writes a random SegmentUID and
/// TrackUIDs and the wall-clock DateUTC unless AVFMT_FLAG_BITEXACT is set, and OpenCV 4.6's
/// VideoWriter has no way to set it (OPENCV_FFMPEG_WRITER_OPTIONS reaches the encoder, not the
/// muxer). So the same frames written twice differ in ~44 bytes. make_matroska_reproducible
/// rewrites those fields in place with values derived from the file itself and recomputes the
/// CRC-32 elements that cover them, so equal frames give equal files.
#include <string>

namespace attest::e2e {

/// In place: SegmentUID := first 16 bytes of a hash of the Clusters, DateUTC := 0 (2001-01-01),
/// each TrackUID := its track's ordinal (TagTrackUID follows), every level-1 CRC-32 recomputed.
/// Sizes and offsets do not change. attest::Error naming the offset when the bytes are not a
/// well-formed EBML/Matroska file (what() starts with "matroska: ").
void make_matroska_reproducible(std::string& bytes);

/// True when every level-1 element that opens with a CRC-32 element carries the right CRC
/// (checked with zlib's crc32, an implementation independent of the one that writes them).
bool matroska_crcs_valid(const std::string& bytes);

}  // namespace attest::e2e
