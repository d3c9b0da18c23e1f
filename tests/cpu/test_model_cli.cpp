// dash-model's command line (apps/model_options.cpp), through the built
// executable: --key=value reads as --key value, and an unknown option or a
// missing value is an error naming it, with exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

[[maybe_unused]] std::string read_file(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

#ifdef DASH_MODEL_EXE
Result run_model(const std::string& args) {
  // One pair of files per process: CTest runs these tests as parallel
  // processes sharing TempDir(), and shared names let one test read (or
  // delete) another's output.
  const std::string dir = ::testing::TempDir() + "dash_model_cli_" + std::to_string(getpid()) + "_";
  const std::string out = dir + "out.txt", err = dir + "err.txt";
  const std::string command = std::string("\"") + DASH_MODEL_EXE + "\" " + args + " > \"" + out + "\" 2> \"" + err + "\"";
  const int status = std::system(command.c_str());
  Result run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  std::remove(out.c_str());
  std::remove(err.c_str());
  return run;
}
#endif

TEST(ModelCli, KeyEqualsValueReadsAsKeySpaceValue) {
#ifndef DASH_MODEL_EXE
  GTEST_SKIP() << "dash-model is not built (DASH_BUILD_APPS=OFF)";
#else
  const Result spaced = run_model("--seqlen 1024 --heads 4 --workers 8 --c 1 --r 0.25 --schedules fa3,shift --json");
  const Result joined = run_model("--seqlen=1024 --heads=4 --workers=8 --c=1 --r=0.25 --schedules=fa3,shift --json");
  ASSERT_EQ(spaced.exit_code, 0) << spaced.err;
  EXPECT_EQ(joined.exit_code, 0) << joined.err;
  EXPECT_EQ(joined.out, spaced.out);
  EXPECT_NE(spaced.out.find("\"schedule\":\"shift\""), std::string::npos) << spaced.out;
  const Result paper = run_model("--paper 4 2 --c=1 --r=0.5");
  EXPECT_EQ(paper.exit_code, 0) << paper.err;
  EXPECT_NE(paper.out.find("paper setting"), std::string::npos) << paper.out;
#endif
}

// --window L,R: the window schedules run (auto as descending), the wave
// schedules are left out of the default list and refused by name.
TEST(ModelCli, WindowRunsTheBandSchedulesAndRefusesWaves) {
#ifndef DASH_MODEL_EXE
  GTEST_SKIP() << "dash-model is not built (DASH_BUILD_APPS=OFF)";
#else
  const Result window = run_model("--seqlen 2048 --heads 2 --workers 16 --window 256,0 --json");
  ASSERT_EQ(window.exit_code, 0) << window.err;
  EXPECT_NE(window.out.find("\"schedule\":\"auto\",\"runs_as\":\"descending\""), std::string::npos) << window.out;
  EXPECT_EQ(window.out.find("shift"), std::string::npos) << window.out;
  EXPECT_EQ(window.out.find("\"deadlock\":true"), std::string::npos) << window.out;
  const Result joined = run_model("--seqlen=2048 --heads=2 --workers=16 --window=256,0 --json");
  EXPECT_EQ(joined.out, window.out);
  const Result narrower = run_model("--seqlen 2048 --heads 2 --workers 16 --window 64,0 --json --schedules descending");
  const Result full = run_model("--seqlen 2048 --heads 2 --workers 16 --json --schedules descending");
  ASSERT_EQ(narrower.exit_code, 0) << narrower.err;
  EXPECT_NE(narrower.out, full.out);  // the band has fewer steps
  const Result wave = run_model("--seqlen 2048 --window 64,0 --causal --schedules symmetric_shift");
  EXPECT_EQ(wave.exit_code, 2);
  EXPECT_NE(wave.err.find("symmetric_shift does not run a sliding window"), std::string::npos) << wave.err;
  const Result malformed = run_model("--seqlen 2048 --window 64");
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("--window expects L,R"), std::string::npos) << malformed.err;
  const Result negative = run_model("--seqlen 2048 --window -2,0");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--window"), std::string::npos) << negative.err;
#endif
}

TEST(ModelCli, UnknownOptionsAndMissingValuesAreClearErrors) {
#ifndef DASH_MODEL_EXE
  GTEST_SKIP() << "dash-model is not built (DASH_BUILD_APPS=OFF)";
#else
  const Result unknown = run_model("--seqlen 1024 --frobnicate=3");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("dash-model: unknown option '--frobnicate'"), std::string::npos) << unknown.err;
  const Result typo = run_model("--wrokers 8");
  EXPECT_NE(typo.err.find("unknown option '--wrokers' (did you mean --workers?)"), std::string::npos) << typo.err;
  const Result missing = run_model("--heads");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("dash-model: --heads needs a value"), std::string::npos) << missing.err;
  const Result paper = run_model("--paper=4");
  EXPECT_NE(paper.err.find("--paper needs 2 values"), std::string::npos) << paper.err;
  const Result calibrate = run_model("--calibrate=results.json --causal");
  EXPECT_NE(calibrate.err.find("--calibrate takes one file and no other option"), std::string::npos) << calibrate.err;
  const Result help = run_model("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--calibrate FILE"), std::string::npos) << help.out;
#endif
}

}  // namespace
