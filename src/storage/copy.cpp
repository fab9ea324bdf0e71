// copy_study(): a study from one store into another (storage.hpp).
#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <fmt/format.h>

namespace tessel {

void copy_study(const study_store& from, study_store& to, const space& s) {
  const auto record = from.study();
  if (!record) throw error(fmt::format("cannot copy '{}': it holds no study", from.location()));
  if (const auto n = to.trial_count(); n > 0)
    throw error(fmt::format(
        "cannot copy into '{}': it holds {} trial{} already (copy into a new store, or clear it "
        "first)",
        to.location(), n, n == 1 ? "" : "s"));
  const auto trials = from.load(s);
  to.begin(*record);  // created_at set: the copy keeps the study's clock
  to.save_all(trials, s);
}

}  // namespace tessel
