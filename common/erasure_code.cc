#include "common/erasure_code.h"

#include <glog/logging.h>
#include <isa-l/erasure_code.h>

#include <algorithm>
#include <bitset>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace nova {

namespace {

// ec_init_tables expands each GF(2^8) coefficient into 32 bytes of lookup tables.
constexpr size_t kTableBytesPerCoefficient = 32;

// EncodeUneven's unit of work: large enough that ISA-L's vector loops dominate the per-call
// cost, small enough that a short column's zero-padded tail (one piece per short column)
// and the pieces' working set stay in cache.
constexpr size_t kPieceBytes = 64 * 1024;

// ISA-L takes an int length; longer runs go in chunks of this many bytes.
constexpr size_t kMaxIsalLen = static_cast<size_t>(INT_MAX);

// ec_encode_data over `len` bytes of `srcs` source columns into `dests` columns with the
// tables of ec_init_tables, in chunks ISA-L's int length can express. ISA-L only reads the
// sources and the tables; its prototype is merely missing the const.
void EncodeWithTables(size_t len, int srcs, int dests, const uint8_t* tables,
                      const uint8_t* const* src, uint8_t* const* dest) {
  auto* gftbls = const_cast<unsigned char*>(tables);
  if (len <= kMaxIsalLen) {
    if (len == 0) return;
    ec_encode_data(static_cast<int>(len), srcs, dests, gftbls, const_cast<unsigned char**>(src),
                   const_cast<unsigned char**>(dest));
    return;
  }
  std::vector<unsigned char*> s(srcs);
  for (int i = 0; i < srcs; ++i) s[i] = const_cast<unsigned char*>(src[i]);
  std::vector<unsigned char*> d(dest, dest + dests);
  for (size_t done = 0; done < len;) {
    const size_t n = std::min(kMaxIsalLen, len - done);
    ec_encode_data(static_cast<int>(n), srcs, dests, gftbls, s.data(), d.data());
    for (auto& p : s) p += n;
    for (auto& p : d) p += n;
    done += n;
  }
}

}  // namespace

ErasureCode::ErasureCode(int k, int m)
    : k_(k),
      m_(m),
      matrix_(static_cast<size_t>(k + m) * k),
      encode_tables_(kTableBytesPerCoefficient * k * m) {
  gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
  // Rows k..k+m-1 make the parity columns.
  ec_init_tables(k, m, matrix_.data() + static_cast<size_t>(k) * k, encode_tables_.data());
}

Result<ErasureCode> ErasureCode::Make(int k, int m) {
  if (k < 1 || m < 1 || k > kMaxColumns - m) {
    return Status::InvalidArgument("erasure code needs k >= 1, m >= 1 and k + m <= " +
                                   std::to_string(kMaxColumns) + ", got k=" +
                                   std::to_string(k) + " m=" + std::to_string(m));
  }
  return ErasureCode(k, m);
}

void ErasureCode::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  EncodeWithTables(len, k_, m_, encode_tables_.data(), data, parity);
}

void ErasureCode::EncodeUneven(const std::vector<std::string_view>& columns,
                               std::vector<std::string>* parity) const {
  DCHECK_EQ(columns.size(), static_cast<size_t>(k_));
  size_t longest = 0;
  for (const auto& c : columns) longest = std::max(longest, c.size());
  parity->assign(m_, std::string());
  if (longest == 0) return;
  for (auto& p : *parity) p.resize(longest);

  // A short column is read through the piece it ends in as a zero-padded copy of its tail
  // (its own slot in `tails`), and past its end as the shared zero piece; every other
  // byte is read in place.
  std::vector<size_t> tail_slot(k_, SIZE_MAX);
  size_t tails_used = 0;
  for (int i = 0; i < k_; ++i) {
    const size_t n = columns[i].size();
    if (n < longest && n % kPieceBytes != 0) tail_slot[i] = tails_used++;
  }
  std::vector<uint8_t> zeros;
  std::vector<uint8_t> tails(tails_used * kPieceBytes, 0);
  for (int i = 0; i < k_; ++i) {
    if (tail_slot[i] == SIZE_MAX) continue;
    const size_t n = columns[i].size();
    const size_t start = n - n % kPieceBytes;
    std::copy(columns[i].begin() + start, columns[i].end(),
              tails.begin() + tail_slot[i] * kPieceBytes);
  }

  std::vector<const uint8_t*> in(k_);
  std::vector<uint8_t*> out(m_);
  for (size_t off = 0; off < longest; off += kPieceBytes) {
    const size_t len = std::min(kPieceBytes, longest - off);
    for (int i = 0; i < k_; ++i) {
      const std::string_view c = columns[i];
      if (c.size() >= off + len) {
        in[i] = reinterpret_cast<const uint8_t*>(c.data()) + off;
      } else if (c.size() > off) {
        in[i] = tails.data() + tail_slot[i] * kPieceBytes;
      } else {
        if (zeros.empty()) zeros.assign(kPieceBytes, 0);
        in[i] = zeros.data();
      }
    }
    for (int j = 0; j < m_; ++j) out[j] = reinterpret_cast<uint8_t*>((*parity)[j].data()) + off;
    Encode(len, in.data(), out.data());
  }
}

Status ErasureCode::Reconstruct(int want, const std::vector<int>& have, size_t len,
                                const uint8_t* const* rows, uint8_t* out) const {
  const int n = k_ + m_;
  if (want < 0 || want >= n) {
    return Status::InvalidArgument("erasure code: column to rebuild " + std::to_string(want) +
                                   " is not in [0, " + std::to_string(n) + ")");
  }
  if (have.size() != static_cast<size_t>(k_)) {
    return Status::InvalidArgument("erasure code: rebuilding needs exactly k=" +
                                   std::to_string(k_) + " columns, got " +
                                   std::to_string(have.size()));
  }
  std::bitset<kMaxColumns> seen;
  for (int c : have) {
    if (c < 0 || c >= n) {
      return Status::InvalidArgument("erasure code: column " + std::to_string(c) +
                                     " is not in [0, " + std::to_string(n) + ")");
    }
    if (c == want) {
      return Status::InvalidArgument("erasure code: column " + std::to_string(c) +
                                     " is both rebuilt and a source");
    }
    if (seen.test(c)) {
      return Status::InvalidArgument("erasure code: column " + std::to_string(c) +
                                     " given twice");
    }
    seen.set(c);
  }
  if (len == 0) return Status::OK();

  // The columns in `have` are B * data, B the k x k matrix of their rows; so data =
  // B^-1 * have, and column `want` (row r of the matrix) = r * B^-1 * have.
  const size_t kk = static_cast<size_t>(k_) * k_;
  std::vector<uint8_t> work(2 * kk + k_ + kTableBytesPerCoefficient * k_);
  uint8_t* b = work.data();
  uint8_t* inverse = b + kk;
  uint8_t* coeffs = inverse + kk;
  uint8_t* tables = coeffs + k_;
  for (int i = 0; i < k_; ++i) {
    std::copy_n(matrix_.data() + static_cast<size_t>(have[i]) * k_, k_, b + i * k_);
  }
  if (gf_invert_matrix(b, inverse, k_) != 0) {
    // Every k x k submatrix of the Cauchy-extended identity is invertible.
    return Status::Corruption("erasure code: the surviving columns' matrix is singular");
  }
  const uint8_t* r = matrix_.data() + static_cast<size_t>(want) * k_;
  if (want < k_) {
    // r is a unit vector: the row of the inverse itself.
    std::copy_n(inverse + static_cast<size_t>(want) * k_, k_, coeffs);
  } else {
    for (int j = 0; j < k_; ++j) {
      uint8_t sum = 0;
      for (int l = 0; l < k_; ++l) sum ^= gf_mul(r[l], inverse[l * k_ + j]);
      coeffs[j] = sum;
    }
  }
  ec_init_tables(k_, 1, coeffs, tables);
  EncodeWithTables(len, k_, 1, tables, rows, &out);
  return Status::OK();
}

}  // namespace nova
