// The tracker flags that crosstune-server, crosstune-build-worker and crosstune-sim-device share.
#include <gtest/gtest.h>

#include "crosstune/server/tracker_link.h"

namespace crosstune::server {
namespace {

TEST(TrackerFlagsTest, TagsBecomeAMapAndTheLastOfAKeyWins) {
  auto tags = ParseTrackerFlags("farm:9190", "rpi4", "", {"soc=bcm2711", "mem=4G", "mem=8G", "x="});
  ASSERT_TRUE(tags.ok()) << tags.status().ToString();
  EXPECT_EQ(*tags,
            (std::map<std::string, std::string>{{"soc", "bcm2711"}, {"mem", "8G"}, {"x", ""}}));
  // Without a tracker no key is needed (a server nobody pools).
  EXPECT_TRUE(ParseTrackerFlags("", "", "", {}).ok());
}

TEST(TrackerFlagsTest, ATrackerWithoutAKeyIsRefused) {
  auto tags = ParseTrackerFlags("farm:9190", "", "", {});
  ASSERT_FALSE(tags.ok());
  EXPECT_EQ(tags.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tags.status().message(), "--tracker needs --key");
}

TEST(TrackerFlagsTest, ATagWithoutKeyOrEqualsSignIsRefusedByName) {
  for (const char* bad : {"soc", "=x"}) {
    auto tags = ParseTrackerFlags("farm:9190", "rpi4", "", {"ok=1", bad});
    ASSERT_FALSE(tags.ok()) << bad;
    EXPECT_EQ(tags.status().message(), std::string("--tag '") + bad + "': expected key=value");
  }
}

TEST(TrackerFlagsTest, Latin1InTheKeyTagsOrAddressIsRefused) {
  // What a Latin-1 shell passes for "Büro": the tracker would refuse the registration later.
  const std::string latin1 = "B\xfcro";
  auto key = ParseTrackerFlags("farm:9190", latin1, "", {});
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), "--key is not valid UTF-8");
  auto addr = ParseTrackerFlags("farm:9190", "rpi4", latin1, {});
  ASSERT_FALSE(addr.ok());
  EXPECT_EQ(addr.status().message(), "--custom-addr is not valid UTF-8");
  auto tag = ParseTrackerFlags("farm:9190", "rpi4", "", {"room=" + latin1});
  ASSERT_FALSE(tag.ok());
  EXPECT_NE(tag.status().message().find("--tag is not valid UTF-8"), std::string::npos);
  // The same text in UTF-8 is fine.
  EXPECT_TRUE(ParseTrackerFlags("farm:9190", "B\xc3\xbcro", "", {"room=B\xc3\xbcro"}).ok());
}

}  // namespace
}  // namespace crosstune::server
