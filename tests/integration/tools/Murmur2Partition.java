// Expected Kafka partitions computed by the Java client itself (kafka-clients'
// org.apache.kafka.common.utils.Utils), the oracle the integration tests compare walrelay's
// placement against.
//
// Usage (single-file source launch, kafka-clients on the class path):
//   java -cp '<kafka libs>/*' Murmur2Partition.java <numPartitions> <hex key bytes>...
// Keys are given as hex of their bytes so that quoting and the platform charset cannot change
// them. Prints one line per key: "<hex> <murmur2 as signed int> <partition>", where partition is
// Utils.toPositive(Utils.murmur2(bytes)) % numPartitions (BuiltInPartitioner.partitionForKey).
import org.apache.kafka.common.utils.Utils;

public class Murmur2Partition {
  public static void main(String[] args) {
    if (args.length < 1) {
      System.err.println("usage: Murmur2Partition <numPartitions> <hex key>...");
      System.exit(2);
    }
    int n = Integer.parseInt(args[0]);
    StringBuilder out = new StringBuilder();
    for (int i = 1; i < args.length; i++) {
      String hex = args[i];
      byte[] bytes = new byte[hex.length() / 2];
      for (int j = 0; j < bytes.length; j++) {
        bytes[j] = (byte) Integer.parseInt(hex.substring(2 * j, 2 * j + 2), 16);
      }
      int h = Utils.murmur2(bytes);
      out.append(hex).append(' ').append(h).append(' ').append(Utils.toPositive(h) % n).append('\n');
    }
    System.out.print(out);
  }
}
