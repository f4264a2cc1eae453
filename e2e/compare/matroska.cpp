// Reproducible Matroska bytes (see matroska.hpp). A minimal EBML walker: only the elements the
// fields live in are descended; everything else is skipped by its size. Hand-written because the
// one library that could do it (libavformat, with AVFMT_FLAG_BITEXACT) is behind OpenCV's
// VideoWriter, which does not expose the flag.
#include "attest/e2e/matroska.hpp"

#include <cstdint>
#include <map>
#include <string>

#include <boost/crc.hpp>
#include <fmt/format.h>
#include <zlib.h>

#include "attest/core/status.hpp"

namespace attest::e2e {
namespace {

constexpr std::uint32_t kSegment = 0x18538067, kInfo = 0x1549A966, kTracks = 0x1654AE6B, kTrackEntry = 0xAE,
                        kTags = 0x1254C367, kTag = 0x7373, kTargets = 0x63C0, kCluster = 0x1F43B675,
                        kSegmentUID = 0x73A4, kDateUTC = 0x4461, kTrackUID = 0x73C5, kTagTrackUID = 0x63C5,
                        kCrc32 = 0xBF;

struct Element {
  std::uint32_t id;
  std::size_t data;  ///< offset of the payload
  std::size_t end;   ///< one past the payload
};

[[noreturn]] void bad(std::size_t at, const std::string& what) {
  throw Error("matroska: " + what + " at byte " + std::to_string(at));
}

// One element header at `at` inside [.., limit): the ID keeps its length marker, the size drops it;
// an all-ones size (unknown, e.g. a live Segment) extends to `limit`.
Element read_element(const std::string& b, std::size_t at, std::size_t limit) {
  auto byte = [&](std::size_t i) {
    if (i >= limit) bad(i, "truncated element header");
    return static_cast<unsigned char>(b[i]);
  };
  const unsigned char first = byte(at);
  int id_len = 1;
  while (id_len <= 4 && !(first & (0x80 >> (id_len - 1)))) ++id_len;
  if (id_len > 4) bad(at, "invalid element ID");
  std::uint32_t id = 0;
  for (int i = 0; i < id_len; ++i) id = (id << 8) | byte(at + i);
  std::size_t p = at + id_len;
  const unsigned char s0 = byte(p);
  int size_len = 1;
  while (size_len <= 8 && !(s0 & (0x80 >> (size_len - 1)))) ++size_len;
  if (size_len > 8) bad(p, "invalid element size");
  std::uint64_t size = s0 & (0xFF >> size_len);
  bool all_ones = size == (0xFFu >> size_len);
  for (int i = 1; i < size_len; ++i) {
    const unsigned char c = byte(p + i);
    all_ones = all_ones && c == 0xFF;
    size = (size << 8) | c;
  }
  const std::size_t data = p + size_len;
  if (all_ones) return {id, data, limit};
  if (size > limit - data) bad(at, fmt::format("element 0x{:X} runs past its parent", id));
  return {id, data, data + static_cast<std::size_t>(size)};
}

std::uint64_t read_uint(const std::string& b, const Element& e) {
  std::uint64_t v = 0;
  for (std::size_t i = e.data; i < e.end; ++i) v = (v << 8) | static_cast<unsigned char>(b[i]);
  return v;
}

void write_uint(std::string& b, const Element& e, std::uint64_t v) {
  for (std::size_t i = e.end; i-- > e.data; v >>= 8) b[i] = static_cast<char>(v & 0xFF);
}

template <class F>
void for_children(const std::string& b, const Element& parent, F&& f) {
  for (std::size_t at = parent.data; at < parent.end;) {
    const Element c = read_element(b, at, parent.end);
    f(c);
    at = c.end;
  }
}

Element segment_of(const std::string& b) {
  if (b.size() < 4 || static_cast<unsigned char>(b[0]) != 0x1A) bad(0, "not an EBML file");
  const Element ebml = read_element(b, 0, b.size());
  const Element seg = read_element(b, ebml.end, b.size());
  if (seg.id != kSegment) bad(ebml.end, "no Segment after the EBML header");
  return seg;
}

// Only master elements hold children; a Void or binary payload must not be parsed, so look at the
// first byte only (0xBF, a 1-byte ID, is the CRC-32 element).
bool opens_with_crc(const std::string& b, const Element& e) {
  return e.end - e.data >= 6 && static_cast<unsigned char>(b[e.data]) == kCrc32;
}

std::uint32_t crc_of(const std::string& b, std::size_t from, std::size_t to) {
  boost::crc_32_type crc;  // IEEE 802.3, as Matroska specifies
  crc.process_bytes(b.data() + from, to - from);
  return crc.checksum();
}

}  // namespace

void make_matroska_reproducible(std::string& b) {
  const Element seg = segment_of(b);
  // The frames decide the SegmentUID: a CRC-based 128-bit digest of the Cluster bytes.
  std::uint32_t h[4] = {0, 0x9E3779B9u, 0x85EBCA6Bu, 0xC2B2AE35u};
  std::map<std::uint64_t, std::uint64_t> track_uid;  // random -> ordinal
  for_children(b, seg, [&](const Element& l1) {
    if (l1.id == kCluster)
      for (auto& x : h) {
        boost::crc_32_type c;
        c.process_bytes(&x, sizeof x);
        c.process_bytes(b.data() + l1.data, l1.end - l1.data);
        x = c.checksum();
      }
    if (l1.id == kTracks)
      for_children(b, l1, [&](const Element& t) {
        if (t.id != kTrackEntry) return;
        for_children(b, t, [&](const Element& f) {
          if (f.id != kTrackUID) return;
          const std::uint64_t ordinal = track_uid.size() + 1;
          track_uid.emplace(read_uint(b, f), ordinal);
          write_uint(b, f, ordinal);
        });
      });
  });
  for_children(b, seg, [&](const Element& l1) {
    if (l1.id == kInfo)
      for_children(b, l1, [&](const Element& f) {
        if (f.id == kDateUTC) write_uint(b, f, 0);
        if (f.id == kSegmentUID)
          for (std::size_t i = f.data; i < f.end; ++i)
            b[i] = static_cast<char>((h[(i - f.data) / 4 % 4] >> (8 * ((i - f.data) % 4))) & 0xFF);
      });
    if (l1.id == kTags)
      for_children(b, l1, [&](const Element& tag) {
        if (tag.id != kTag) return;
        for_children(b, tag, [&](const Element& tg) {
          if (tg.id != kTargets) return;
          for_children(b, tg, [&](const Element& f) {
            if (f.id != kTagTrackUID) return;
            const auto it = track_uid.find(read_uint(b, f));
            if (it == track_uid.end()) bad(f.data, "TagTrackUID names no track");
            write_uint(b, f, it->second);
          });
        });
      });
  });
  // CRC-32 elements (first child, 4 bytes, little-endian) cover the rest of their parent.
  for_children(b, seg, [&](const Element& l1) {
    if (l1.id == kCluster || !opens_with_crc(b, l1)) return;  // Clusters were not touched
    const Element c = read_element(b, l1.data, l1.end);
    if (c.end - c.data != 4) bad(c.data, "CRC-32 element is not 4 bytes");
    const std::uint32_t v = crc_of(b, c.end, l1.end);
    for (int i = 0; i < 4; ++i) b[c.data + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  });
}

bool matroska_crcs_valid(const std::string& b) {
  const Element seg = segment_of(b);
  bool ok = true;
  for_children(b, seg, [&](const Element& l1) {
    if (!opens_with_crc(b, l1)) return;
    const Element c = read_element(b, l1.data, l1.end);
    if (c.end - c.data != 4) return;
    std::uint32_t stored = 0;
    for (int i = 3; i >= 0; --i) stored = (stored << 8) | static_cast<unsigned char>(b[c.data + i]);
    const auto* p = reinterpret_cast<const Bytef*>(b.data() + c.end);
    ok = ok && stored == static_cast<std::uint32_t>(::crc32(0L, p, static_cast<uInt>(l1.end - c.end)));
  });
  return ok;
}

}  // namespace attest::e2e
